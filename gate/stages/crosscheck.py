"""The cuobjdump cross-check: cuobjdump's view of an artifact, and where it differs from ours.

Our own fatbin reader (gate.reader) is the primary inspector. Where cuobjdump is
available it runs too, as an independent cross-check: any disagreement on what
cuobjdump can show (kinds, archs, order, kernel names, PTX ISA) fails the gate, with
both listings in the evidence. Every listing is judged by its content, never by a
tool's exit status. cuobjdump refusing a file our reader reads ("Invalid fatbin header")
is a disagreement too: the two readers' word on the same bytes, not a tool failure.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from gate import proc
from gate.errors import ToolError
from gate.evidence import EvidenceDir
from gate.reader.listing import DeviceEntry, Kind, Listing
from gate.record import CrossCheck
from gate.rules.targets import Variant
from gate.stages.sassdump import Deferred, write_sass
from gate.tools import buildcache, cuobjdump

# Full SASS dumps cost minutes on real libraries (FATBIN.md): only below this size, or on request.
SASS_DUMP_LIMIT = 16 * 1024 * 1024
# How much of cuobjdump's refusal a disagreement quotes, and how many of our entries it names.
_SAID_LIMIT = 200
_ENTRIES_NAMED = 4


def find_cuobjdump(*, use_cuobjdump: bool) -> tuple[str | None, str]:
    """cuobjdump's path, or None and why the cross-check is not run."""
    if not use_cuobjdump:
        return None, "cuobjdump cross-check not run: turned off with --no-cuobjdump"
    try:
        return cuobjdump.find(), ""
    except ToolError as e:
        return None, (
            f"cuobjdump cross-check not run: {e.one_line()}; "
            "`pip install 'cuda-gate[cuobjdump]'` (nox -s gate does) gives it"
        )


def our_list(listing: Listing) -> str:
    """An ELF/PTX list in cuobjdump's style, from our reader (when cuobjdump is absent)."""
    lines = []
    for kind, label in ((Kind.SASS, "ELF"), (Kind.PTX, "PTX")):
        for i, e in enumerate(listing.of_kind(kind), 1):
            lines.append(f"{label} file {i:>4}: {e.name or 'entry'}.{e.target.as_sass()}")
    return "\n".join(lines) + "\n"


def cuobjdump_listing(
    tool: str,
    path: Path,
    evidence: EvidenceDir,
    *,
    prefix: str,
    dump_sass: str,
    size: int,
    digest: str,
    use_cache: bool = True,
    deferred: Deferred | None = None,
    checked: bool = True,
) -> tuple[Listing, tuple[cuobjdump.PtxText, ...]]:
    """cuobjdump's view of one artifact: its calls run side by side, and an output already
    kept for these bytes and this cuobjdump is not asked again (gate.tools.buildcache).

    With ``deferred``, the full SASS dump is left running there (its SASS checked when
    ``checked``); without, it is waited for and written here.
    """
    wanted = [["--list-elf"], ["--list-ptx"], ["-symbols"], ["--dump-ptx"]]
    dump = dump_sass == "always" or (dump_sass == "auto" and size <= SASS_DUMP_LIMIT)
    if dump and deferred is None:
        wanted.append(["--dump-sass"])

    def one(args: list[str], *, claim: bool = True) -> proc.Result | ToolError:
        try:
            return buildcache.tool_output(
                [tool, *args, str(path)],
                subject=path,
                digest=digest,
                companions=[str(Path(tool).parent / "nvdisasm")],
                run=lambda: cuobjdump.run_tool(tool, args, path, claim_strays=claim),
                use_cache=use_cache,
            )
        except ToolError as e:
            return e

    if dump and deferred is not None:
        # It runs on beside the project's entry points: it claims no strays (gate.proc).
        deferred.submit(
            lambda: one(["--dump-sass"], claim=False), evidence, path.name, prefix, checked=checked
        )
    with ThreadPoolExecutor(len(wanted)) as pool:
        elf_list, ptx_list, symbols, ptx, *sass = pool.map(one, wanted)
    listings = (elf_list, ptx_list, symbols, ptx)
    for done in listings:
        if isinstance(done, ToolError) and not isinstance(done, cuobjdump.RefusedError):
            raise done
    refused = [done for done in listings if isinstance(done, cuobjdump.RefusedError)]
    if refused:
        # Not as elf-list.txt and the rest: those are checked for cubins and PTX, which
        # a refusal does not hold (the cross-check says what happened instead).
        said = [
            done.result if isinstance(done, cuobjdump.RefusedError) else done for done in listings
        ]
        evidence.write_text(
            f"{prefix}cuobjdump-refused.txt",
            "".join(
                f"$ {' '.join(r.argv)}\n{r.output()}\n" for r in said if isinstance(r, proc.Result)
            ),
        )
        raise refused[0]
    assert isinstance(elf_list, proc.Result)  # noqa: S101 - errors were raised above
    assert isinstance(ptx_list, proc.Result)  # noqa: S101
    assert isinstance(symbols, proc.Result)  # noqa: S101
    assert isinstance(ptx, proc.Result)  # noqa: S101
    evidence.write_text(f"{prefix}elf-list.txt", elf_list.output())
    evidence.write_text(f"{prefix}ptx-list.txt", ptx_list.output())
    evidence.write_text(f"{prefix}symbols.txt", symbols.output())
    evidence.write_text(f"{prefix}ptx.txt", ptx.stdout)
    for dumped in sass:
        write_sass(evidence, prefix, dumped)
    return cuobjdump.listing(symbols.stdout, ptx.stdout), tuple(
        cuobjdump.parse_ptx_dump(ptx.stdout)
    )


def cross_check(
    tool: str,
    ours: Listing,
    path: Path,
    evidence: EvidenceDir,
    *,
    prefix: str,
    dump_sass: str,
    size: int,
    digest: str,
    use_cache: bool = True,
    deferred: Deferred | None = None,
    checked: bool = True,
) -> tuple[CrossCheck, tuple[cuobjdump.PtxText, ...]]:
    """cuobjdump's listing of ``path`` (:func:`cuobjdump_listing`, whose options these are)
    compared with ours; a file cuobjdump refuses and our reader read is one disagreement,
    saying both readers' word."""
    label = f"cuobjdump ({cuobjdump.version(tool)})"
    try:
        theirs, modules = cuobjdump_listing(
            tool,
            path,
            evidence,
            prefix=prefix,
            dump_sass=dump_sass,
            size=size,
            digest=digest,
            use_cache=use_cache,
            deferred=deferred,
            checked=checked,
        )
    except cuobjdump.RefusedError as e:
        return CrossCheck(label, (refusal(e.said, ours),)), ()
    return CrossCheck(label, compare(ours, theirs)), modules


def refusal(said: str, ours: Listing) -> str:
    """The disagreement of a file cuobjdump refused (``said``: its fatal line) and we read."""
    if len(said) > _SAID_LIMIT:
        said = said[: _SAID_LIMIT - 1] + "\u2026"
    named = [f"{e.kind.value} {e.target}" for e in ours.entries[:_ENTRIES_NAMED]]
    if len(ours.entries) > _ENTRIES_NAMED:
        named.append("...")
    read = f"{len(ours.entries)} entries ({', '.join(named)})" if named else "no device code"
    return f"cuobjdump refuses the file ({said}); the cuda-gate reader reads {read}"


def _comparable(entry: DeviceEntry) -> tuple[str, str, str, tuple[str, ...]]:
    # cuobjdump names an sm_100f cubin sm_100: compare without the family suffix.
    target = entry.target
    if target.variant is Variant.FAMILY:
        target = target.plain()
    isa = str(entry.ptx_isa) if entry.ptx_isa else "-"
    return entry.kind.value, str(target), isa, tuple(sorted(entry.kernels))


def compare(ours: Listing, theirs: Listing) -> tuple[str, ...]:
    """Where cuobjdump's listing and ours differ, in the sections cuobjdump reads."""
    sections = {e.section for e in ours.entries}
    primary = ".nv_fatbin" if ".nv_fatbin" in sections else "__nv_relfatbin"
    out: list[str] = []
    # cuobjdump lists ELF and PTX only: our Tile IR, LTO IR and unknown kinds are no
    # disagreement (cuobjdump 13.5 passes over a Tile IR entry, listing the cubins beside it).
    for kind in (Kind.SASS, Kind.PTX):
        mine = [_comparable(e) for e in ours.of_kind(kind) if e.section == primary]
        other = [_comparable(e) for e in theirs.of_kind(kind)]
        if len(mine) != len(other):
            out.append(f"{kind.value}: cuda-gate lists {len(mine)} entries, cuobjdump {len(other)}")
        for i, (a, b) in enumerate(zip(mine, other, strict=False), 1):
            if a[:2] != b[:2]:
                out.append(f"{kind.value} entry {i}: cuda-gate {a[1]}, cuobjdump {b[1]}")
            elif kind is Kind.PTX and a[2] != b[2] and b[2] != "-":
                out.append(f"{kind.value} entry {i} ({a[1]}): ISA {a[2]} vs cuobjdump {b[2]}")
            elif a[3] != b[3]:
                only_ours = sorted(set(a[3]) - set(b[3]))[:3]
                only_theirs = sorted(set(b[3]) - set(a[3]))[:3]
                out.append(
                    f"{kind.value} entry {i} ({a[1]}): kernels differ "
                    f"(only cuda-gate: {only_ours}; only cuobjdump: {only_theirs})"
                )
    return tuple(out)
