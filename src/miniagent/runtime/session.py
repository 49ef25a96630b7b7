"""AgentSession: the state of one run, kept apart from the agent's configuration."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field

from miniagent.types import Message, RunResult, RunStatus, Step, TokenUsage


@dataclass(kw_only=True)
class AgentSession:
    """Everything one run has accumulated. ``messages`` only ever grows."""

    question: str
    id: str = field(default_factory=lambda: uuid.uuid4().hex[:16])
    messages: list[Message] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    usage: TokenUsage = field(default_factory=TokenUsage)
    status: RunStatus | None = None
    reason: str = ""
    final_answer: str | None = None
    started_at: float = field(default_factory=time.time)
    elapsed: float = 0.0

    @classmethod
    def start(cls, question: str) -> AgentSession:
        session = cls(question=question)
        session.messages.append(Message(role="user", content=question))
        return session

    @property
    def done(self) -> bool:
        return self.status is not None

    def finish(self, status: RunStatus, reason: str, final_answer: str | None = None) -> None:
        """Record how the run ended; the first call wins."""
        if self.status is None:
            self.status, self.reason, self.final_answer = status, reason, final_answer

    def result(self) -> RunResult:
        return RunResult(
            status=self.status or "error",
            reason=self.reason or "the run ended without a status",
            session_id=self.id,
            final_answer=self.final_answer,
            steps=list(self.steps),
            usage=self.usage,
            messages=list(self.messages),
            elapsed=self.elapsed,
        )
