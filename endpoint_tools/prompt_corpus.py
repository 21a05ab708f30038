"""Varied, realistic request text for load tests (and for training the test model's tokenizer).

A load test with one repeated prompt measures the prefix cache, not the server: vLLM reuses the
KV blocks of a shared prefix and time to first token collapses. So prompts are assembled from
sentences of different kinds of work a serving endpoint sees (support, code, summaries, questions),
shuffled per request with a seeded random generator, then cut to the sampled token length.
"""

from __future__ import annotations

import random

SENTENCES: tuple[str, ...] = (
    "Summarize the following customer email in two sentences and list any action items.",
    "My order arrived with a cracked screen and the replacement has been delayed twice.",
    "Please explain the difference between a process and a thread to a new engineer.",
    "Write a Python function that merges two sorted lists without using the sort method.",
    "The quarterly report shows revenue grew by twelve percent while costs stayed flat.",
    "Translate the next paragraph into plain English for a non-technical reader.",
    "Our Kubernetes pods restart every few hours with an out of memory error.",
    "What are the main risks of running a database migration during business hours?",
    "The patient reports mild headaches in the morning that fade by the afternoon.",
    "Draft a polite reply declining the meeting and proposing a time next week.",
    "Compare the trade-offs of caching responses at the edge versus in the application.",
    "The train from the north was forty minutes late because of a signal failure.",
    "Classify the sentiment of each review below as positive, negative or neutral.",
    "List three ways to reduce the cold start time of a container that loads a large model.",
    "The contract renews automatically unless either party gives ninety days of notice.",
    "Explain why the sky appears blue during the day and red at sunset.",
    "A user asks how to reset a password when the recovery email no longer exists.",
    "Refactor this loop so that it does not allocate a new buffer on every iteration.",
    "The hiking trail climbs steadily through pine forest before reaching an open ridge.",
    "Give a short history of the printing press and its effect on literacy in Europe.",
    "The service level objective is ninety nine point nine percent of requests under one second.",
    "Extract the names, dates and amounts from the invoice text and return them as JSON.",
    "Why does my SQL query get slower when the table grows past a few million rows?",
    "The recipe calls for two cups of flour, a pinch of salt and a spoon of honey.",
    "Rewrite the product description to sound friendly but keep it under fifty words.",
    "The support ticket was escalated after the customer waited three days for an answer.",
    "Describe how a load balancer decides which backend receives the next request.",
    "Solar panels on the warehouse roof now cover most of the building's daytime power.",
    "Outline a study plan for learning linear algebra in eight weeks.",
    "The error message says permission denied when the job writes to the shared volume.",
    "Suggest a name for a small bakery that specializes in sourdough bread.",
    "Write unit tests for a function that parses durations such as ten minutes or two hours.",
    "The committee approved the budget but asked for a review of travel expenses.",
    "How should a team choose between fine tuning a model and improving the prompt?",
    "The river flooded the lower fields after a week of heavy autumn rain.",
    "Answer the question using only the context provided and say so if it is not there.",
    "The latency graph shows a spike every night when the backup job starts.",
    "Explain recursion with an example that a high school student can follow.",
    "The new hire asked where to find the on-call runbook and the escalation policy.",
    "Estimate how many requests per second a single server can handle with this workload.",
    "A short story begins with a lighthouse keeper who finds a letter in a bottle.",
    "Check this paragraph for grammar mistakes and suggest clearer wording.",
    "The shipment contains twelve boxes of spare parts and four crates of tools.",
    "What questions should I ask before accepting a job offer from a startup?",
    "The configuration file sets the timeout to thirty seconds and retries to three.",
    "Convert the meeting notes into a list of decisions and owners with due dates.",
    "The museum opens a new exhibit on ancient navigation and star charts next month.",
    "Describe the steps to roll back a failed deployment without losing user data.",
    "The weather forecast predicts light snow in the mountains and rain in the valley.",
    "Help me write a cover letter for a data analyst position at a hospital.",
)


def passage(rng: random.Random, min_chars: int) -> str:
    """Sentences in a random order, repeated with reshuffles, until at least `min_chars` long."""
    parts: list[str] = []
    size = 0
    while size < min_chars:
        order = list(SENTENCES)
        rng.shuffle(order)
        for sentence in order:
            parts.append(sentence)
            size += len(sentence) + 1
            if size >= min_chars:
                break
    return " ".join(parts)
