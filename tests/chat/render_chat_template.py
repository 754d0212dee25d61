#!/usr/bin/env python3
"""Renders conversations with a real chat template text through Jinja2, the way Hugging Face
transformers does (trim_blocks, lstrip_blocks, tojson = json.dumps(ensure_ascii=False),
raise_exception), to make the goldens the C++ formatters are compared against.

Usage: render_chat_template.py CASES.json  ->  prints a JSON list, one entry per case:
{"text": "..."} or {"error": "..."}.

CASES.json: {"template": PATH, "bos_token": "<bos>", "eos_token": "</s>", "gemma_tools": bool,
             "cases": [{"messages": [...], "tools": [...] | null, "add_generation_prompt": bool}]}

With gemma_tools, tools and tool turns are first rewritten into the plain messages of
Channel's Gemma function-calling convention (docs/chat-and-server.md), since the Gemma 3
template itself has no tools: the tool list joins the system text, a call becomes a
```tool_code``` block of the model turn, consecutive results one user turn of
```tool_output``` blocks.
"""
import json
import sys

import jinja2

GEMMA_PREAMBLE = (
    "You can call these functions. To call one, write a Python call in a ```tool_code``` "
    "block, for example:\n```tool_code\nname(argument=value)\n```\nEach result comes back in "
    "a ```tool_output``` block.\n")


def dumps(value, indent=None):
    return json.dumps(value, ensure_ascii=False, indent=indent)


def gemma_rewrite(messages, tools):
    out = []
    msgs = list(messages)
    if tools:
        preamble = GEMMA_PREAMBLE + "".join("\n" + dumps(t["function"]) for t in tools)
        if msgs and msgs[0]["role"] == "system":
            out.append({"role": "system", "content": msgs[0]["content"] + "\n\n" + preamble})
            msgs = msgs[1:]
        else:
            out.append({"role": "system", "content": preamble})
    for m in msgs:
        if m["role"] == "assistant" and m.get("tool_calls"):
            calls = "\n".join(
                "```tool_code\n" + c["function"]["name"] + "(" +
                ", ".join(k + "=" + dumps(v) for k, v in c["function"]["arguments"].items()) +
                ")\n```" for c in m["tool_calls"])
            content = m.get("content") or ""
            out.append({"role": "assistant",
                        "content": (content + "\n" if content else "") + calls})
        elif m["role"] == "tool":
            block = "```tool_output\n" + m["content"] + "\n```"
            if out and out[-1].get("_tool"):
                out[-1]["content"] += "\n" + block
            else:
                out.append({"role": "user", "content": block, "_tool": True})
        else:
            out.append(dict(m))
    for m in out:
        m.pop("_tool", None)
    return out


def raise_exception(message):
    raise jinja2.exceptions.TemplateError(message)


def main():
    spec = json.load(open(sys.argv[1], encoding="utf-8"))
    env = jinja2.Environment(trim_blocks=True, lstrip_blocks=True,
                             extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = lambda x, indent=None: dumps(x, indent)
    env.globals["raise_exception"] = raise_exception
    template = env.from_string(open(spec["template"], encoding="utf-8").read())
    results = []
    for case in spec["cases"]:
        messages, tools = case["messages"], case.get("tools")
        if spec.get("gemma_tools"):
            messages, tools = gemma_rewrite(messages, tools), None
        ctx = {"messages": messages, "bos_token": spec.get("bos_token", ""),
               "eos_token": spec.get("eos_token", ""),
               "add_generation_prompt": case.get("add_generation_prompt", False)}
        if tools is not None:
            ctx["tools"] = tools
        try:
            results.append({"text": template.render(**ctx)})
        except Exception as e:  # the template raised: the formatter must refuse too
            results.append({"error": str(e)})
    json.dump(results, sys.stdout, ensure_ascii=False)


if __name__ == "__main__":
    main()
