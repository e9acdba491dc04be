"""``echomq score``, help texts, exit codes of usage errors, shell completion."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from cli.clitools import RunCli, one_line_error
from echomq.cli import cli as root


def test_encode_prints_score_hex_and_bit_fields(cli: RunCli) -> None:
    proc = cli("score", "encode", "2", "7", queue=False)
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "8589934599" in out
    assert "0x2_00000007" in out
    assert "bits 32–52" in out and "bits 0–31" in out
    ruler = [line.strip() for line in out.splitlines()]
    assert "000000000000000000010 00000000000000000000000000000111" in ruler
    numbers = next(line for line in ruler if line.startswith("52"))
    assert numbers.split() == ["52", "32", "31", "0"]
    assert any("tier 2" in line and "counter 7" in line and "└" in line for line in ruler)


def test_decode_accepts_hex_and_prints_json(cli: RunCli) -> None:
    proc = cli("score", "decode", "0x1_000003E7", "--json", queue=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout) == {
        "score": 4294968295,
        "hex": "0x1_000003E7",
        "tier": 1,
        "counter": 999,
        "tier_bits": [32, 52],
        "counter_bits": [0, 31],
    }


def test_compare_says_the_tier_dominates(cli: RunCli) -> None:
    proc = cli("score", "compare", "2", "1", "1", "999", queue=False)
    assert proc.returncode == 0, proc.stderr
    assert "Job B pops first: tier 1 < tier 2" in proc.stdout
    assert "tier dominates the counter" in proc.stdout
    same = cli("score", "compare", "3", "9", "3", "5", "--json", queue=False)
    verdict = json.loads(same.stdout)
    assert verdict["first"] == "B" and "arrived earlier" in verdict["reason"]


def test_out_of_range_is_one_line_exit_1(cli: RunCli) -> None:
    line = one_line_error(cli("score", "encode", "2097152", "0", queue=False))
    assert "2097152" in line and "2097151" in line
    line = one_line_error(cli("score", "decode", "0x20000000000000", queue=False))
    assert "2^53" in line
    one_line_error(cli("score", "decode", "twelve", queue=False))


def test_usage_errors_exit_2(cli: RunCli) -> None:
    for args in (
        ("score", "encode", "2"),
        ("nosuchcommand",),
        ("stats", "--bogus"),
        ("add",),
        ("worker",),
    ):
        proc = cli(*args, queue=False)
        assert proc.returncode == 2, (args, proc.stderr)
        assert "Usage:" in proc.stderr and "Traceback" not in proc.stderr


def _all_commands(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    found = []
    ctx = click.Context(group)
    for name in group.list_commands(ctx):  # the root group imports its commands lazily
        command = group.get_command(ctx, name)
        assert command is not None, name
        found.append((*prefix, name))
        if isinstance(command, click.Group):
            found += _all_commands(command, (*prefix, name))
    return found


@pytest.mark.parametrize("path", _all_commands(root), ids=" ".join)
def test_every_help_has_an_example(path: tuple[str, ...]) -> None:
    result = CliRunner().invoke(root, [*path, "--help"], prog_name="echomq")
    assert result.exit_code == 0, result.output
    assert "Example" in result.output
    assert f"echomq {path[0]}" in result.output


def test_shell_completion_lists_commands(cli: RunCli) -> None:
    env = {"_ECHOMQ_COMPLETE": "bash_complete", "COMP_WORDS": "echomq sc", "COMP_CWORD": "1"}
    proc = cli(queue=False, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "plain,score" in proc.stdout.splitlines()
    env = {"_ECHOMQ_COMPLETE": "bash_complete", "COMP_WORDS": "echomq dead ", "COMP_CWORD": "2"}
    names = {line.split(",", 1)[1] for line in cli(queue=False, env=env).stdout.splitlines()}
    assert {"list", "retry", "purge"} <= names
    source = cli(queue=False, env={"_ECHOMQ_COMPLETE": "bash_source"})
    assert "complete" in source.stdout and "_ECHOMQ_COMPLETE" in source.stdout
