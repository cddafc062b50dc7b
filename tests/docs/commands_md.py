#!/usr/bin/env python3
"""docs/commands.md, the command reference, made from proto/commands.json (names,
syntax, summaries, complexity, ACL categories) and docs/command_notes.md (a short note
per command on how bloomery answers it).

    commands_md.py ROOT            writes ROOT/docs/commands.md
    commands_md.py ROOT --check    exits 1 if ROOT/docs/commands.md is not what it writes

Every top-level command needs a note; a note for a name the table lacks is refused, so
neither file can drift from the other.
"""

import json
import os
import re
import sys

GROUPS = [
    ("bf", "Bloom filters"),
    ("cf", "Cuckoo filters"),
    ("generic", "Keys"),
    ("transactions", "Transactions"),
    ("pubsub", "Pub/Sub"),
    ("connection", "Connections"),
    ("server", "Server"),
    ("cluster", "Cluster"),
]


def argument_syntax(argument):
    """One argument as Redis's documentation writes it: [optional], name [name ...]."""
    kind = argument["type"]
    token = argument.get("token")
    if kind == "pure-token":
        text = token
    elif kind == "oneof":
        text = "|".join(argument_syntax(a) for a in argument["arguments"])
        if token:
            text = token + " " + text
        elif "optional" not in argument.get("flags", []):
            text = "<" + text + ">"
    elif kind == "block":
        text = " ".join(argument_syntax(a) for a in argument["arguments"])
        if token:
            text = token + " " + text
    else:
        text = argument["name"]
        if token:
            text = token + " " + text
    flags = argument.get("flags", [])
    if "multiple" in flags:
        repeated = argument["name"] if kind not in ("pure-token",) else text
        text = text + " [" + repeated + " ...]"
    if "optional" in flags:
        text = "[" + text + "]"
    return text


def syntax(command):
    name = command["name"].replace("|", " ").upper()
    parts = [name] + [argument_syntax(a) for a in command.get("arguments", [])]
    return " ".join(parts)


def read_notes(path):
    """`### name` headings (lower case, 'parent|sub' for a subcommand), each followed by
    its note's paragraphs."""
    notes = {}
    current = None
    with open(path, encoding="utf-8") as f:
        for line in f:
            heading = re.match(r"^### (\S+)\s*$", line)
            if heading:
                current = heading.group(1).lower()
                if current in notes:
                    raise SystemExit("%s: '%s' has two notes" % (path, current))
                notes[current] = []
            elif current is not None:
                notes[current].append(line.rstrip("\n"))
    return {name: "\n".join(lines).strip() for name, lines in notes.items()}


def describe(command, notes, level):
    lines = ["#" * level + " " + command["name"].replace("|", " ").upper(), ""]
    lines.append("```")
    lines.append(syntax(command))
    lines.append("```")
    lines.append("")
    facts = command.get("summary", "").rstrip(".") + "."
    if command.get("complexity"):
        facts += " Complexity: " + command["complexity"] + "."
    categories = " ".join("`%s`" % c for c in command.get("acl_categories", []))
    if categories:
        facts += " ACL categories: " + categories + "."
    if "deprecated" in command.get("doc_flags", []):
        facts += " Deprecated"
        if command.get("replaced_by"):
            facts += ": use " + command["replaced_by"]
        facts += "."
    lines.append(facts)
    note = notes.get(command["name"])
    if note:
        lines += ["", note]
    lines.append("")
    for sub in command.get("subcommands", []):
        lines += describe(sub, notes, level + 1)
    return lines


def render(root):
    with open(os.path.join(root, "proto", "commands.json"), encoding="utf-8") as f:
        table = json.load(f)
    notes_path = os.path.join(root, "docs", "command_notes.md")
    notes = read_notes(notes_path)
    commands = table["commands"]
    known = {c["name"] for c in commands}
    known |= {s["name"] for c in commands for s in c.get("subcommands", [])}
    problems = ["%s: no note for '%s'" % (notes_path, c["name"])
                for c in commands if c["name"] not in notes]
    problems += ["%s: a note for '%s', which proto/commands.json does not have" % (notes_path, n)
                 for n in sorted(set(notes) - known)]
    groups = {g for g, _ in GROUPS}
    problems += ["proto/commands.json: '%s' is in group '%s', which %s does not list"
                 % (c["name"], c.get("group"), os.path.basename(__file__))
                 for c in commands if c.get("group") not in groups]
    if problems:
        raise SystemExit("\n".join(problems))
    out = [
        "# Commands",
        "",
        "<!-- Made by tests/docs/commands_md.py from proto/commands.json and",
        "     docs/command_notes.md; edit those, then run",
        "     `python3 tests/docs/commands_md.py .` (a test checks this file is current). -->",
        "",
        "Every command bloomery answers, with Redis's syntax notation: `[optional]`,",
        "`a|b` one of them, `name [name ...]` one or more. Commands not listed answer",
        "`ERR unknown command`. Error texts and the protocol's limits are in",
        "[proto/resp.md](../proto/resp.md); what `COMMAND DOCS` answers comes from the",
        "same table.",
        "",
    ]
    for group, title in GROUPS:
        members = [c for c in commands if c.get("group") == group]
        if not members:
            continue
        out.append("- [%s](#%s): %s" % (title, re.sub(r"[^a-z0-9 -]", "", title.lower())
                                         .replace(" ", "-"),
                                         ", ".join(c["name"].upper() for c in members)))
    out.append("")
    for group, title in GROUPS:
        members = [c for c in commands if c.get("group") == group]
        if not members:
            continue
        out += ["## " + title, ""]
        for command in members:
            out += describe(command, notes, 3)
    return "\n".join(out).rstrip("\n") + "\n"


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    root = sys.argv[1]
    text = render(root)
    target = os.path.join(root, "docs", "commands.md")
    if "--check" in sys.argv[2:]:
        current = open(target, encoding="utf-8").read() if os.path.exists(target) else ""
        if current != text:
            raise SystemExit("docs/commands.md is out of date: run "
                             "`python3 tests/docs/commands_md.py .` and commit it")
        return
    with open(target, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main()
