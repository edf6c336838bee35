#!/usr/bin/env python3
"""Makes a pgbench script of a template and the statements the intake-api sends.

    bench/pgbench_script.py TEMPLATE INTAKE_API > SCRIPT

The template is a pgbench script (comments, \\set lines...) with two lines of its own:
  \\bind NAME EXPRESSION   what pgbench binds for the statements' value NAME: an SQL
                          expression of pgbench's variables (the bind line is dropped);
  \\statement NAME [META]  the statement NAME as `INTAKE_API statements NAME` prints it,
                          each `$n` replaced by its value's expression, ended by META (a
                          pgbench meta-command such as \\gset) or else by a semicolon.
So pgbench runs the very text the service sends, with its values made by pgbench.
"""

import json
import re
import subprocess
import sys


def literal(value):
    """A value the statement always binds, written as SQL."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(value)
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    sys.exit(f"pgbench_script: no SQL literal for {value!r}")


def statement(binary, name, binds):
    printed = subprocess.run(
        [binary, "statements", name, "-o", "json"],
        check=True, capture_output=True, text=True,
    ).stdout
    found = json.loads(printed)
    values = []
    for n, parameter in enumerate(found["parameters"], start=1):
        if isinstance(parameter, dict):
            values.append(literal(parameter["value"]))
        elif parameter in binds:
            values.append(f"({binds[parameter]})")
        else:
            sys.exit(f"pgbench_script: the template binds nothing to {name}'s ${n}, {parameter}")

    def value(match):
        n = int(match.group(1))
        if not 1 <= n <= len(values):
            sys.exit(f"pgbench_script: {name} has ${n} but names {len(values)} values")
        return values[n - 1]

    return re.sub(r"\$(\d+)", value, found["sql"])


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    template, binary = sys.argv[1:]
    binds = {}
    out = []
    with open(template, encoding="utf-8") as lines:
        for line in lines:
            line = line.rstrip("\n")
            if line.startswith("\\bind "):
                _, name, expression = line.split(" ", 2)
                binds[name] = expression
            elif line.startswith("\\statement "):
                _, name, *meta = line.split(" ", 2)
                sql = statement(binary, name, binds)
                out.append(f"{sql} {meta[0]}" if meta else f"{sql};")
            else:
                out.append(line)
    print("\n".join(out))


if __name__ == "__main__":
    main()
