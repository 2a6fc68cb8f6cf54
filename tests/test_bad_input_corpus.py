"""A bad-input corpus made from the real samples and the simulator's files, through `perfwh ingest` as a user runs it.

Every sample under PERFWH_SAMPLES and one simulated file of each of our own formats is mutated: truncated at
many offsets, bytes flipped, re-encoded (UTF-16, Latin-1, BOM, CRLF, invalid UTF-8, NUL bytes), a huge line,
deep nesting, NaN / infinite / negative / overflowing numbers, gzip-wrapped, gzip cut short and a gzip bomb,
under file names with `..` and shell characters, plus links that point out of the landing zone. All of it is
landed and ingested by one `perfwh ingest` process, which runs under a Python audit hook that records every
write-like operation (open for writing, rename, remove, mkdir, link, copy) outside PERFWH_HOME.

For each case: a manifest row (ok with rows, or quarantined / skipped with its reason); no traceback; no
write outside PERFWH_HOME (the audit hook, and the working, home and temp folders of the process stay empty);
a second ingest adds nothing.
"""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from perf_assets.lib.ingest import ingest
from perf_assets.lib.ingest.deliver import deliver
from perf_assets.lib.ingest.manifest import read_manifest
from perf_assets.lib.ingest.run import MAX_REASON_CHARS
from perf_assets.lib.paths import REPO_ROOT, data_home
from perf_assets.lib.simulate import simulate

SAMPLE_SOURCES = {
    "dcgm_exporter": "dcgm",
    "kineto": "kineto",
    "mlperf_mllog": "mlperf",
    "nccl_tests": "nccl_tests",
    "nsys_sqlite": "nsys",
    "nvidia_smi": "nvidia_smi",
    "slurm_sacct": "sacct",
}
SACCT_FORMAT = (
    "User,JobID,JobName,State,Partition,NCPUS,NNodes,CPUTime,TotalCPU,UserCPU,SystemCPU,ReqMem,MaxRSS,Submit,"
    "Start,End,NodeList\n"
)
# Prefixes of landed file names: shell syntax, `..`, quotes, spaces, a newline, non-ASCII, globs.
ODD_NAMES = [
    "$(touch PWNED)",
    "`touch PWNED`",
    ";touch PWNED;",
    "a|b&c>d<e",
    "x..",
    "a..b",
    "-rf ",
    "sp ace",
    "quo'te\"",
    "new\nline",
    "ünï",
    "%2e%2e%2f",
    "*?[",
    "tab\t",
    "back\\slash",
    "",
]
HUGE_LINE_BYTES = 3 << 20
NESTING = 100_000
BIG_BASE_BYTES = 400_000  # bases larger than this (decompressed) get the byte-level mutations only

# Runs `perfwh` with an audit hook; prints the write-like operations outside PERFWH_HOME on its last line.
RUNNER = r"""
import json, os, sys
home = os.path.realpath(os.environ["PERFWH_HOME"])
outside = []
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND | os.O_TRUNC

def _inside(path):
    if path is None or isinstance(path, int):
        return True
    real = os.path.realpath(os.fsdecode(path))
    return real == home or real.startswith(home + os.sep) or real == "/dev/null"

def _hook(event, args):
    if event == "open":
        path, mode, flags = args
        writes = (isinstance(mode, str) and any(c in mode for c in "wax+")) or bool((flags or 0) & WRITE_FLAGS)
        paths = [path] if writes else []
    elif event in ("os.rename", "shutil.copyfile", "shutil.copytree", "os.link", "os.symlink", "shutil.move"):
        paths = [args[1]]
    elif event in ("os.remove", "os.rmdir", "os.mkdir", "os.truncate", "shutil.rmtree", "os.chmod", "os.utime"):
        paths = [args[0]]
    else:
        return
    found = [(event, os.fsdecode(p)) for p in paths if not _inside(p)]
    if found and os.getpid() != PARENT:  # a forked ingest worker: reported as it happens (it never reaches finally)
        sys.stderr.write("OUTSIDE-WRITES-CHILD " + json.dumps(found) + "\n")
        sys.stderr.flush()
    outside.extend(found)

PARENT = os.getpid()
sys.addaudithook(_hook)
from perf_assets.cli import main
try:
    code = main(sys.argv[1:])
finally:
    sys.stdout.flush()
    sys.stderr.write("\nOUTSIDE-WRITES " + json.dumps(outside) + "\n")
sys.exit(code)
"""


@dataclass(frozen=True)
class Case:
    source: str
    name: str
    data: bytes
    mutation: str


# --------------------------------------------------------------------------- mutations


def _truncations(data: bytes) -> list[tuple[str, bytes]]:
    n = len(data)
    offsets = sorted({0, 1, 7, n // 100, n // 10, n // 4, n // 3, n // 2, 2 * n // 3, 3 * n // 4, 9 * n // 10, n - 1})
    return [(f"truncated@{offset}", data[:offset]) for offset in offsets if 0 <= offset < n]


def _flips(data: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    out = []
    for count in (1, 1, 2, 4, 8, 64):
        mutated = bytearray(data)
        for _ in range(count):
            position = rng.randrange(len(mutated))
            mutated[position] ^= 1 << rng.randrange(8) if count < 64 else 0xFF
        out.append((f"flipped{count}", bytes(mutated)))
    return out


def _numbers(text: str, replace) -> str:
    return re.sub(r"(?<![\w.])-?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?(?![\w.])", replace, text)


def _content_mutations(data: bytes, rng: random.Random) -> list[tuple[str, bytes]]:
    text = data.decode("utf-8", "replace")
    middle = len(data) // 2
    cut = data.rfind(b"\n", 0, middle) + 1 if b"\n" in data[:middle] else middle
    every_third = iter(range(10**9))
    out = [
        ("utf16", text.encode("utf-16")),
        ("utf16le-nobom", text.encode("utf-16-le")),
        ("utf8-bom", b"\xef\xbb\xbf" + data),
        ("latin1", (text[: len(text) // 2] + "é ÿ ß" + text[len(text) // 2 :]).encode("latin-1", "replace")),
        ("crlf", data.replace(b"\n", b"\r\n")),
        ("invalid-utf8", data[:cut] + b"\xff\xfe\xc3\x28\xa0\xa1\n" + data[cut:]),
        ("nul-bytes", data[:cut] + b"\x00" * 64 + data[cut:]),
        ("huge-line", data[:cut] + b"x" * HUGE_LINE_BYTES + b"\n" + data[cut:]),
        ("one-huge-line", data.replace(b"\n", b" ")[:HUGE_LINE_BYTES] + b"9" * HUGE_LINE_BYTES),
        ("deep-nesting-line", data[:cut] + b"[" * NESTING + b"]" * NESTING + b"\n" + data[cut:]),
        ("deep-nesting-object", (b'{"a":' * NESTING) + b"1" + b"}" * NESTING),
        ("nan", _numbers(text, lambda m: "NaN").encode()),
        (
            "negative",
            _numbers(text, lambda m: m.group(0)[1:] if m.group(0).startswith("-") else "-" + m.group(0)).encode(),
        ),
        ("infinite", _numbers(text, lambda m: "inf" if next(every_third) % 3 == 0 else m.group(0)).encode()),
        ("overflow", _numbers(text, lambda m: "1e999" if rng.random() < 0.3 else m.group(0)).encode()),
        ("huge-int", _numbers(text, lambda m: "9" * 400 if rng.random() < 0.2 else m.group(0)).encode()),
        ("minus-zero", _numbers(text, lambda m: "-0" if rng.random() < 0.5 else m.group(0)).encode()),
        ("empty-lines", data.replace(b"\n", b"\n\n \t\n")),
    ]
    return out


def _gzip_bomb() -> bytes:
    """~400 MB of spaces in ~400 KB: one 20 MB member repeated (a gzip file may hold many members)."""
    member = gzip.compress(b" " * (20 << 20), compresslevel=9)
    return member * 20


def _gzip_mutations(data: bytes, bomb: bytes) -> list[tuple[str, bytes]]:
    packed = gzip.compress(data, compresslevel=1)
    return [
        ("gzipped", packed),
        ("gzip-cut", packed[: max(len(packed) // 2, 11)]),
        ("gzip-bomb", bomb),
        ("gzip-bad-crc", packed[:-8] + bytes(8)),
    ]


def mutations(data: bytes, rng: random.Random, bomb: bytes) -> list[tuple[str, bytes]]:
    """Byte-level mutations of the file as landed; content-level ones of its (decompressed) content."""
    plain = gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data
    out = _truncations(data) + _flips(data, rng) + _gzip_mutations(plain, bomb)
    if len(plain) <= BIG_BASE_BYTES:
        rezip = data[:2] == b"\x1f\x8b"
        for name, mutated in _content_mutations(plain, rng):
            out.append((name, gzip.compress(mutated, compresslevel=1) if rezip else mutated))
    return out


# --------------------------------------------------------------------------- the corpus


def base_files(samples: Path, simulated: Path) -> list[tuple[str, Path]]:
    """(source, file): every sample export, and one simulated file of each of our own formats."""
    bases = [
        (SAMPLE_SOURCES[path.parent.name], path)
        for path in sorted(samples.rglob("*"))
        if path.is_file() and path.name != "SOURCES.md"
    ]
    for source_dir in sorted(path for path in simulated.iterdir() if path.is_dir()):
        files = sorted(path for path in source_dir.rglob("*") if path.is_file())
        if files:
            bases.append((source_dir.name, min(files, key=lambda path: path.stat().st_size)))
    return bases


def build_corpus(samples: Path, simulated: Path) -> list[Case]:
    rng = random.Random(20261129)
    bomb = _gzip_bomb()
    cases = []
    for source, path in base_files(samples, simulated):
        for mutation, data in mutations(path.read_bytes(), rng, bomb):
            odd = ODD_NAMES[len(cases) % len(ODD_NAMES)]
            cases.append(Case(source, f"{odd}{len(cases):04d}-{path.name}", data, mutation))
    return cases


def land(landing: Path, cases: list[Case]) -> dict[str, Case]:
    """Write each case under landing/<source>/corpus/2026-11-01/ (sacct with its format sidecar)."""
    where = {}
    for case in cases:
        folder = landing / case.source / "corpus" / "2026-11-01"
        folder.mkdir(parents=True, exist_ok=True)
        if case.source == "sacct":
            (folder / "sacct_format.txt").write_text(SACCT_FORMAT)
        (folder / case.name).write_bytes(case.data)
        where[f"{case.source}/corpus/2026-11-01/{case.name}"] = case
    return where


def run_perfwh(args: list[str], home: Path, sandbox: Path) -> subprocess.CompletedProcess:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "PERFWH_HOME": str(home),
        "HOME": str(sandbox / "home"),
        "TMPDIR": str(sandbox / "tmp"),
        "PYTHONPATH": str(REPO_ROOT),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PERFWH_COMPACT_MIN_FILES": "1000000",  # keep the corpus's rows in their per-file Parquet
    }
    return subprocess.run(
        [sys.executable, "-c", RUNNER, *args],
        cwd=sandbox / "cwd",
        env=env,
        capture_output=True,
        text=True,
        timeout=900,
    )


def outside_writes(stderr: str) -> list:
    """The writes outside PERFWH_HOME the audit hook saw, in the perfwh process and its forked workers."""
    line = [line for line in stderr.splitlines() if line.startswith("OUTSIDE-WRITES ")][-1]
    children = [line for line in stderr.splitlines() if line.startswith("OUTSIDE-WRITES-CHILD ")]
    return json.loads(line.split(" ", 1)[1]) + [
        write for line in children for write in json.loads(line.split(" ", 1)[1])
    ]


@pytest.mark.slow  # ~1 min: 1,300+ files through one `perfwh ingest`
def test_every_bad_input_ends_as_data_or_a_quarantine_row_and_nothing_leaves_the_home(samples, tmp_path):
    simulated = data_home(tmp_path / "simulated").ensure()
    simulate(simulated, scenario="demo", seed=3, days=1)
    cases = build_corpus(samples, simulated.landing)
    assert len(cases) >= 1000, len(cases)

    home = tmp_path / "home"
    landing = home / "landing"
    where = land(landing, cases)
    secret = tmp_path / "outside-secret.jsonl"  # links out of the landing zone are never read
    secret.write_text((simulated.landing / "labels.json").read_text())
    links = {}
    for number, target in enumerate((secret, Path("/etc/hostname"), tmp_path / "missing", landing.parent)):
        link = landing / "inventory" / "corpus" / "2026-11-01" / f"link{number}.jsonl"
        link.symlink_to(target)
        links[link.relative_to(landing).as_posix()] = target
    sandbox = tmp_path / "sandbox"
    for folder in ("home", "tmp", "cwd"):
        (sandbox / folder).mkdir(parents=True)

    landed_before = sorted(path for path in landing.rglob("*"))
    started = time.perf_counter()
    first = run_perfwh(["ingest", str(landing)], home, sandbox)
    elapsed = time.perf_counter() - started
    print(f"\nbad-input corpus: {len(cases)} cases + {len(links)} links ingested in {elapsed:.1f} s")

    assert first.returncode in (0, 1), first.stderr[-3000:]
    assert "Traceback" not in first.stderr and "Traceback" not in first.stdout, first.stderr[-3000:]
    assert outside_writes(first.stderr) == []
    manifest = {row["path"]: row for row in read_manifest(home / "lake" / "ingest_manifest").to_pylist()}
    outcomes: dict[str, int] = {}
    for path, case in where.items():
        row = manifest.get(path)
        assert row is not None, f"no manifest row for {case.mutation} of {case.name!r}"
        if row["status"] == "ok":
            assert row["rows"] > 0 or row["reason"], (case.mutation, case.name, row)
        else:
            assert row["status"] in ("quarantined", "skipped") and row["reason"], (case.mutation, case.name, row)
            # the reason names the problem: no parser fell over with an unexplained exception
            assert not row["reason"].startswith("parser error"), (case.mutation, case.name, row["reason"])
        assert len(row["reason"] or "") <= MAX_REASON_CHARS
        outcomes[row["status"]] = outcomes.get(row["status"], 0) + 1
    assert not [path for path in manifest if path.endswith("/sacct_format.txt")]  # a sidecar is not data
    for path in links:
        row = manifest[path]
        assert row["status"] == "quarantined" and "not a file inside the landing zone" in row["reason"], row
        assert row["rows"] == 0
    print(f"outcomes: {outcomes}")
    assert outcomes.get("ok", 0) >= 100 and outcomes.get("quarantined", 0) >= 300  # both ends are exercised

    assert sorted(path for path in landing.rglob("*")) == landed_before  # landing/ is never written to
    # nothing left in the process's working, home and temp folders; no shell syntax in a name was run
    for folder in ("home", "tmp", "cwd"):
        assert list((sandbox / folder).iterdir()) == [], folder
    for root in (tmp_path, REPO_ROOT, samples):
        assert not list(root.glob("PWNED*")) and not list(root.glob("*/PWNED*"))
    assert not list(home.rglob("PWNED")) and not list(landing.glob("*/corpus/2026-11-01/PWNED"))
    # the lake holds no temp file a reader could see, and a second ingest adds nothing
    assert not [p for p in (home / "lake").rglob("*") if p.name.startswith(".tmp-")]
    second = run_perfwh(["ingest", str(landing)], home, sandbox)
    assert "Traceback" not in second.stderr and outside_writes(second.stderr) == []
    again = read_manifest(home / "lake" / "ingest_manifest").to_pylist()
    assert len(again) == len(manifest), [row for row in again if row["path"] not in manifest]
    assert f"0 ok, 0 quarantined, {len(manifest)} already ingested" in second.stdout
    shutil.rmtree(home)  # ~300 MB of mutated files: not kept among pytest's last three temp folders


# --------------------------------------------------------------------------- the bugs the corpus found


def test_an_nsys_export_named_with_uri_characters_is_read_in_place(samples, tmp_path):
    """`?` and `#` in a landed name used to end SQLite's URI early: it created an empty database beside the file."""
    home = data_home(tmp_path / "home").ensure()
    folder = home.landing / "nsys" / "lab" / "2026-11-01"
    folder.mkdir(parents=True)
    sample = samples / "nsys_sqlite" / "extrap_win_gtx1060_concurrent_s1.sqlite"
    shutil.copyfile(sample, folder / "run?mode=rwc#1 %41.sqlite")

    (outcome,) = ingest(home)

    assert outcome.status == "ok" and outcome.rows > 0, outcome
    assert sorted(path.name for path in folder.iterdir()) == ["run?mode=rwc#1 %41.sqlite"]


def test_links_out_of_the_landing_zone_are_quarantined_unread(tmp_path):
    home = data_home(tmp_path / "home").ensure()
    folder = home.landing / "node_events" / "lab" / "2026-11-01"
    folder.mkdir(parents=True)
    event = (
        '{"version": 1, "node": "n1", "state": "down", "reason": "x", "start": "2026-11-01T00:00:00Z", "end": null}\n'
    )
    outside = tmp_path / "outside.jsonl"
    outside.write_text(event)
    (folder / "inside.jsonl").write_text(event)
    (folder / "to-outside.jsonl").symlink_to(outside)
    (folder / "dangling.jsonl").symlink_to(tmp_path / "missing.jsonl")
    (folder / "to-a-folder.jsonl").symlink_to(tmp_path)
    (folder / "to-inside.jsonl").symlink_to(folder / "inside.jsonl")

    outcomes = {Path(outcome.path).name: outcome for outcome in ingest(home)}

    for name in ("to-outside.jsonl", "dangling.jsonl", "to-a-folder.jsonl"):
        assert outcomes[name].status == "quarantined" and outcomes[name].rows == 0
        assert "not a file inside the landing zone: not read" in outcomes[name].reason
    assert outcomes["inside.jsonl"].rows == 1 and outcomes["to-inside.jsonl"].rows == 1  # a link within landing/
    assert {outcome.status for outcome in ingest(home)} == {"already_ingested"}

    # `perfwh ingest FOLDER` from outside: a dangling link is a problem named, not a crash
    given = tmp_path / "given"
    given.mkdir()
    (given / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    landed, problems = deliver(home, [given], source="node_events")
    assert landed == [] and problems == [
        f"{given / 'gone.jsonl'}: not a file (a link to '{tmp_path / 'missing.jsonl'}')"
    ]
