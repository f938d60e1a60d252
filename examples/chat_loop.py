"""A chat loop with long-term memory: any OpenAI-compatible chat model plus memoryd.

Before each model call it asks memoryd for a context block about the user's message;
after the answer it enqueues the finished interaction (202, the chat never waits for
memory work).

    export OPENAI_BASE_URL=http://127.0.0.1:11434/v1 OPENAI_MODEL=qwen2.5 OPENAI_API_KEY=...
    export MEMORYD_URL=http://127.0.0.1:8420 MEMORYD_API_KEY=$(cat ~/.memoryd/api-key)
    python examples/chat_loop.py --user alice            # reads lines from stdin
    python examples/chat_loop.py --user alice --once "我女儿叫什么名字?"

A test drives it with `main([...])` or `run_turn(...)`.
"""

from __future__ import annotations

import argparse
import os
import sys
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TextIO

import httpx

from memoryd.client import MemorydClient, MemorydError

SYSTEM = ("You are a helpful assistant with long-term memory. Use what you remember about "
          "the user when it helps; do not mention memories that do not matter here.")


@dataclass
class ChatConfig:
    base_url: str
    model: str
    api_key: str | None
    user_id: str
    thread_id: str = field(default_factory=lambda: f"chat-{uuid.uuid4().hex[:8]}")
    token_budget: int = 400
    extract: str = "rules"
    timeout_s: float = 60.0


@dataclass
class Conversation:
    messages: list[dict[str, str]] = field(default_factory=list)


def chat_completion(llm: httpx.Client, config: ChatConfig, messages: list[dict[str, str]]) -> str:
    """`POST {base_url}/chat/completions`, the OpenAI protocol; the first choice's text."""
    response = llm.post("/chat/completions", json={"model": config.model, "messages": messages})
    response.raise_for_status()
    body: dict[str, Any] = response.json()
    return str(body["choices"][0]["message"]["content"] or "")


def run_turn(
    llm: httpx.Client, memory: MemorydClient, config: ChatConfig, conversation: Conversation,
    text: str,
) -> str:
    """One turn: context from memoryd → the model → the interaction back to memoryd."""
    recent = conversation.messages[-6:]
    system = SYSTEM
    try:
        context = memory.context(config.user_id, text, token_budget=config.token_budget,
                                 recent_messages=recent or None)
        if context.block:
            system = f"{SYSTEM}\n\n{context.block}"
    except MemorydError as exc:  # memory is a help, not a dependency of the chat
        sys.stderr.write(f"[memoryd unavailable: {exc}]\n")
    messages = [{"role": "system", "content": system}, *recent, {"role": "user", "content": text}]
    reply = chat_completion(llm, config, messages)
    conversation.messages += [{"role": "user", "content": text},
                              {"role": "assistant", "content": reply}]
    try:
        memory.add_interaction(config.user_id, conversation.messages[-2:],
                               thread_id=config.thread_id, extract=config.extract)
    except MemorydError as exc:
        sys.stderr.write(f"[interaction not stored: {exc}]\n")
    return reply


def _default_memoryd_key() -> str | None:
    key = os.environ.get("MEMORYD_API_KEY")
    if key:
        return key
    path = Path(os.environ.get("MEMORYD_DATA_DIR", Path.home() / ".memoryd")) / "api-key"
    return path.read_text().strip() if path.is_file() else None


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    env = os.environ.get
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--base-url", default=env("OPENAI_BASE_URL", "http://127.0.0.1:11434/v1"),
                        help="OpenAI-compatible API base URL (env OPENAI_BASE_URL)")
    parser.add_argument("--model", default=env("OPENAI_MODEL", "gpt-4o-mini"),
                        help="model name (env OPENAI_MODEL)")
    parser.add_argument("--api-key", default=env("OPENAI_API_KEY"),
                        help="model API key (env OPENAI_API_KEY)")
    parser.add_argument("--memoryd-url", default=env("MEMORYD_URL", "http://127.0.0.1:8420"))
    parser.add_argument("--memoryd-key", default=None,
                        help="env MEMORYD_API_KEY, else <MEMORYD_DATA_DIR>/api-key")
    parser.add_argument("--user", required=True, help="the user's id in memoryd")
    parser.add_argument("--thread", default=None, help="thread id (default: a new one)")
    parser.add_argument("--token-budget", type=int, default=400)
    parser.add_argument("--extract", choices=("raw", "rules", "llm"), default="rules")
    parser.add_argument("--once", default=None, help="send one message, print the answer, exit")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None, stdin: TextIO | None = None,
         stdout: TextIO | None = None) -> int:
    args = parse_args(argv)
    stdin, stdout = stdin or sys.stdin, stdout or sys.stdout
    config = ChatConfig(base_url=args.base_url, model=args.model, api_key=args.api_key,
                        user_id=args.user, token_budget=args.token_budget, extract=args.extract)
    if args.thread:
        config.thread_id = args.thread
    headers = {"authorization": f"Bearer {config.api_key}"} if config.api_key else {}
    conversation = Conversation()
    with httpx.Client(base_url=config.base_url.rstrip("/"), headers=headers,
                      timeout=config.timeout_s) as llm, \
            MemorydClient(args.memoryd_url, args.memoryd_key or _default_memoryd_key()) as memory:
        lines = [args.once] if args.once is not None else (line.rstrip("\n") for line in stdin)
        for line in lines:
            if not line.strip():
                continue
            try:
                reply = run_turn(llm, memory, config, conversation, line)
            except httpx.HTTPError as exc:
                sys.stderr.write(f"the model call failed: {exc}\n")
                return 1
            stdout.write(reply + "\n")
            stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
