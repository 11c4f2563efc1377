"""The prompts the chat template of a tokenizer folder gives for the conversations of
tests/data/chat_sample.json: with transformers' apply_chat_template where transformers is
installed (the GPU machine), else by rendering the template with jinja2 the way transformers
does (sandboxed, trim_blocks, lstrip_blocks, loopcontrols; Debian's python3-jinja2).

    python3 scripts/chat_template_reference.py TOKENIZER_FOLDER > tests/data/chat_sample.qwen3.json
"""
import json
import pathlib
import sys

root = pathlib.Path(__file__).resolve().parent.parent
cases = json.loads((root / "tests/data/chat_sample.json").read_text(encoding="utf-8"))
folder = pathlib.Path(sys.argv[1])

try:
    from transformers import AutoTokenizer
    tok = AutoTokenizer.from_pretrained(str(folder))

    def render(messages, add_generation_prompt, extra):
        return tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=add_generation_prompt, **extra)
    engine = "transformers"
except ImportError:
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    config = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = lambda x, indent=None: json.dumps(x, ensure_ascii=False, indent=indent)
    template = env.from_string(config["chat_template"])

    def render(messages, add_generation_prompt, extra):
        return template.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               bos_token=config.get("bos_token") or "", eos_token=config.get("eos_token") or "", **extra)
    engine = "jinja2"

out = [render(c["messages"], c["add_generation_prompt"], {} if c["enable_thinking"] else {"enable_thinking": False})
       for c in cases]
print(f"chat_template_reference: rendered with {engine}", file=sys.stderr)
print(json.dumps(out, ensure_ascii=False, indent=1))
