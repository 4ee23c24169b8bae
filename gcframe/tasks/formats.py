"""How a prompt is shown to a model: a property of the task + tokenizer pair, decided once when a task is built.

    plain   the task's own text ("12+34="); the sampler puts <bos> before it
    chat    the task's question as one user turn (after an optional system turn), rendered by the tokenizer's
            chat template with the generation prompt ("<|im_start|>assistant\\n"): the completion is the assistant's
            turn, and it ends with the template's end-of-turn token (gcframe.modeling.configure_tokenizer)

Methods, the sampler and the engine see only the rendered prompt text.
"""
from __future__ import annotations

from dataclasses import dataclass

from gcframe.errors import UserError


@dataclass
class PromptFormat:
    chat: bool = False
    """Render through the tokenizer's chat template (else plain text)."""
    tok: object = None
    """The tokenizer whose template renders chat prompts."""
    system_prompt: str | None = None
    """The system turn; None keeps the template's default."""

    @property
    def name(self) -> str:
        return "chat" if self.chat else "plain"

    def render(self, plain: str, question: str) -> str:
        """The prompt text: `plain` as is, or `question` as a user turn through the chat template."""
        if not self.chat:
            return plain
        messages = [] if self.system_prompt is None else [{"role": "system", "content": self.system_prompt}]
        messages.append({"role": "user", "content": question})
        return self.tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)


def resolve_format(prompt_format: str, system_prompt: str | None, tok) -> PromptFormat:
    """task.prompt_format ("auto" | "chat" | "plain") for this tokenizer."""
    has_template = bool(getattr(tok, "chat_template", None)) if tok is not None else False
    if prompt_format == "chat" and not has_template:
        raise UserError("task.prompt_format is chat but the model's tokenizer has no chat template: use "
                        "prompt_format: plain (or auto), or a model whose tokenizer_config.json has a chat_template")
    chat = has_template if prompt_format == "auto" else prompt_format == "chat"
    return PromptFormat(chat=chat, tok=tok if chat else None, system_prompt=system_prompt)
