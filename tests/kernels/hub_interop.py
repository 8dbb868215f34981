"""Oracle: Tlaloc's kernel hub against Hugging Face's `kernels` package (0.17.2, the venv's).

What it checks, each as a named case that prints PASS or FAIL (exit 1 on any failure):

- variants: one repository of every variant kind, sealed with `tlaloc kernels seal`, is
  resolved by `tlaloc kernels variants --target T` and by `kernels`' own resolver
  (`kernels.variants._resolve_variant_for_system`, with the system given explicitly) for a CPU
  (x86_64 Linux), a CUDA 12.8 and a TPU system; the two must choose the same variant and accept
  the same ones in the same order. Variant names differ by their framework part (Tlaloc's
  `tlaloc1-` / `tlaloc-` against the hub's `torch29-cxx11-` / `torch-`), so each resolver gets
  the repository in its own naming, and the other direction (a repository laid out the way
  `kernels` expects, renamed for Tlaloc) is the same comparison read from the hub's side.
  That neither resolver accepts the other's names is asserted too (docs/kernels.md, the table).
- metadata: a Tlaloc-sealed metadata.json (with the hub's `python-depends`) is read by
  `kernels.Metadata`, and its digest validates against `kernels.Digest.hash_variant`; a
  tampered file is refused by both. A digest written by the hub is accepted by
  `tlaloc kernels verify`.
- lockfile: `kernels.KernelLocks.to_json` is read by `tlaloc kernels download` (the commit
  fetched from a local git repository, every variant verified), and `tlaloc kernels lock
  --format hub` is read by `kernels.KernelLocks.from_json` with the same repo id and commit.

Usage: hub_interop.py TLALOC_BINARY WORK_DIR
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.version import Version

from kernels import backends as kb
from kernels import variants as kv
from kernels._rust import (Digest, DigestAlgorithm, KernelDependency, KernelLock, KernelLocks,
                           KernelVersion, Metadata)

FAILURES = []


def check(name, ok, detail=""):
    print(("PASS " if ok else "FAIL ") + name + ("" if ok else ": " + detail))
    if not ok:
        FAILURES.append(name)


def run(cmd, cwd=None, expect=0):
    p = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True)
    if expect is not None and p.returncode != expect:
        raise RuntimeError(f"{' '.join(map(str, cmd))} exited {p.returncode}: {p.stderr}{p.stdout}")
    return p


# Tlaloc variant name -> the hub's name for the same build (framework part swapped).
TWINS = {
    "tlaloc1-cpu-x86_64-linux": "torch29-cxx11-cpu-x86_64-linux",
    "tlaloc1-cpu-aarch64-linux": "torch29-cxx11-cpu-aarch64-linux",
    "tlaloc1-cu126-x86_64-linux": "torch29-cxx11-cu126-x86_64-linux",
    "tlaloc1-cu128-x86_64-linux": "torch29-cxx11-cu128-x86_64-linux",
    "tlaloc1-cu130-x86_64-linux": "torch29-cxx11-cu130-x86_64-linux",
    "tlaloc1-rocm64-x86_64-linux": "torch29-cxx11-rocm64-x86_64-linux",
    "tlaloc-cpu": "torch-cpu",
    "tlaloc-cuda": "torch-cuda",
    "tlaloc-tpu": "torch-tpu",
    "tlaloc-universal": "torch-universal",
}
FROM_HUB = {v: k for k, v in TWINS.items()}

# System: Tlaloc's --target, the hub's backend object.
SYSTEMS = {
    "cpu": ("cpu", kb.CPU()),
    "cuda12.8": ("cuda12.8:sm90", kb.CUDA(version=Version("12.8"))),
    "tpu": ("tpu", kb.TPU()),
}


def metadata(variant):
    """A metadata.json both readers take: Tlaloc's fields plus the hub's python-depends."""
    backend = variant.split("-")[1]
    kind = {"cu126": "cuda", "cu128": "cuda", "cu130": "cuda", "rocm64": "rocm"}.get(backend,
                                                                                   backend)
    layer = {"operands": ["x"], "results": ["y"], "attributes": [], "dtypes": ["f32"]}
    m = {"name": "relu", "id": "tlaloc-tests/relu", "version": 1, "license": "Apache-2.0",
         "backend": {"type": kind}, "python-depends": [], "layers": {"ReLU": layer}}
    if kind == "universal":
        m["module"] = "relu.mlir"
        layer["function"] = "relu"
        payload = "relu.mlir"
    elif kind == "tpu":
        layer["payload"] = "relu.mosaic"
        payload = "relu.mosaic"
    else:
        m["library"] = "librelu.so"
        layer["symbol"] = "tlaloc_relu_f32"
        payload = "librelu.so"
    if kind in ("cpu", "cuda", "rocm") and variant.count("-") == 3:
        m["backend"]["archs"] = [variant.split("-")[2]] if kind == "cpu" else ["9.0"]
    return m, payload


def make_tlaloc_repo(tlaloc, root):
    for variant in TWINS:
        d = root / "build" / variant
        d.mkdir(parents=True)
        m, payload = metadata(variant)
        (d / "metadata.json").write_text(json.dumps(m, indent=2))
        (d / payload).write_text(f"payload of {variant}\n")
    run([tlaloc, "kernels", "seal"] + [str(root / "build" / v) for v in TWINS])


def tlaloc_ranking(tlaloc, repo, target):
    """(chosen, accepted in order) from `tlaloc kernels variants`."""
    out = run([tlaloc, "kernels", "variants", str(repo), "--target", target]).stdout
    accepted, chosen = [], None
    for line in out.splitlines()[1:]:
        parts = line.split()
        if len(parts) >= 2 and parts[1] in ("chosen", "accepted"):
            accepted.append(parts[0])
            if parts[1] == "chosen":
                chosen = parts[0]
    return chosen, accepted


def hub_ranking(names, backend):
    """(chosen, accepted in order) from the hub's resolver for an x86_64 Linux system."""
    parsed = [kv.parse_variant(n) for n in names]
    accepted, _ = kv._resolve_variant_for_system(
        variants=parsed, selected_backend=backend, cpu="x86_64", os="linux",
        torch_version=Version("2.9"), torch_cxx11_abi=True, tvm_ffi_version=None)
    names = [v.variant_str for v in accepted]
    return (names[0] if names else None), names


def check_variants(tlaloc, repo):
    hub_names = sorted(TWINS.values())
    for system, (target, backend) in SYSTEMS.items():
        t_chosen, t_accepted = tlaloc_ranking(tlaloc, repo, target)
        h_chosen, h_accepted = hub_ranking(hub_names, backend)
        h_accepted_t = [FROM_HUB[n] for n in h_accepted]
        check(f"variants.{system}.chosen", t_chosen is not None and
              t_chosen == FROM_HUB.get(h_chosen), f"tlaloc {t_chosen}, kernels {h_chosen}")
        check(f"variants.{system}.accepted_order", t_accepted == h_accepted_t,
              f"tlaloc {t_accepted}, kernels {h_accepted_t}")
        print(f"  {system}: both choose {t_chosen} / {h_chosen}; accepted {t_accepted}")
    # Neither reads the other's names: the hub skips tlaloc-* folders, Tlaloc rejects torch-*.
    check("variants.hub_skips_tlaloc_names", kv.get_variants_local(repo / "build") == [],
          str(kv.get_variants_local(repo / "build")))
    hub_repo = repo.parent / "hub-named"
    for t, h in TWINS.items():
        shutil.copytree(repo / "build" / t, hub_repo / "build" / h)
    out = run([tlaloc, "kernels", "variants", str(hub_repo), "--target", "cpu"]).stdout
    check("variants.tlaloc_rejects_hub_names",
          " chosen " not in out and out.count("does not start with 'tlaloc'") == len(TWINS), out)
    # The hub's resolver on its own layout finds the twins it was given.
    found = sorted(v.variant_str for v in kv.get_variants_local(hub_repo / "build"))
    check("variants.hub_reads_its_layout", found == hub_names, str(found))


def check_metadata(tlaloc, repo, work):
    for variant in ("tlaloc-tpu", "tlaloc1-cpu-x86_64-linux", "tlaloc1-cu128-x86_64-linux"):
        d = repo / "build" / variant
        try:
            m = Metadata.read_from_file(str(d / "metadata.json"))
            m.digest.validate(Digest.hash_variant(DigestAlgorithm.SHA256, str(d)))
            check(f"metadata.{variant}.hub_reads_and_validates", True)
        except Exception as e:  # noqa: BLE001 - any refusal is the finding
            check(f"metadata.{variant}.hub_reads_and_validates", False, repr(e))
    # The hub has no universal backend type: Tlaloc's tlaloc-universal metadata is refused.
    try:
        Metadata.read_from_file(str(repo / "build" / "tlaloc-universal" / "metadata.json"))
        check("metadata.universal_refused_by_hub", False, "the hub read backend type universal")
    except Exception as e:  # noqa: BLE001
        check("metadata.universal_refused_by_hub", "universal" in str(e), str(e))
    # Tampering: both refuse.
    bad = work / "tampered"
    shutil.copytree(repo, bad)
    (bad / "build" / "tlaloc-tpu" / "relu.mosaic").write_text("changed\n")
    d = bad / "build" / "tlaloc-tpu"
    try:
        Metadata.read_from_file(str(d / "metadata.json")).digest.validate(
            Digest.hash_variant(DigestAlgorithm.SHA256, str(d)))
        check("metadata.tamper.hub_refuses", False, "validated")
    except Exception as e:  # noqa: BLE001
        check("metadata.tamper.hub_refuses", "relu.mosaic" in str(e), str(e))
    p = run([tlaloc, "kernels", "verify", str(bad)], expect=None)
    check("metadata.tamper.tlaloc_refuses", p.returncode != 0 and "relu.mosaic" in p.stdout +
          p.stderr, p.stdout + p.stderr)
    # A digest the hub computed, written into metadata.json, passes `tlaloc kernels verify`.
    hub = work / "hub-digest"
    shutil.copytree(repo, hub)
    for d in (hub / "build").iterdir():
        meta = json.loads((d / "metadata.json").read_text())
        meta["digest"] = {"algorithm": "sha256",
                          "files": Digest.hash_variant(DigestAlgorithm.SHA256, str(d)).files}
        (d / "metadata.json").write_text(json.dumps(meta))
    p = run([tlaloc, "kernels", "verify", str(hub)], expect=None)
    check("metadata.hub_digest.tlaloc_verifies", p.returncode == 0, p.stdout + p.stderr)


def git(repo, *args):
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@t", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@t")
    return subprocess.run(["git", "-C", str(repo)] + list(args), check=True, capture_output=True,
                          text=True, env=env).stdout.strip()


def check_lockfiles(tlaloc, repo, work):
    git(repo, "init", "-q", "-b", "v1")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "v1")
    commit = git(repo, "rev-parse", "HEAD")
    url = "file://" + str(repo)
    cache = str(work / "cache")
    # The hub writes, Tlaloc reads: the commit is fetched and every variant verified.
    hub_lock = work / "hub.lock"
    dep = KernelDependency(url, KernelVersion.Version(1))
    hub_lock.write_text(KernelLocks({dep: KernelLock(commit)}).to_json())
    p = run([tlaloc, "kernels", "download", "--lockfile", str(hub_lock), "--cache", cache],
            expect=None)
    check("lockfile.hub_written.tlaloc_downloads",
          p.returncode == 0 and commit in p.stdout, p.stdout + p.stderr)
    # Tlaloc writes (--format hub), the hub reads: same repo id, version and commit.
    t_lock = work / "tlaloc-hub.lock"
    run([tlaloc, "kernels", "lock", url + "@v1", "--lockfile", str(t_lock), "--format", "hub",
         "--cache", cache])
    try:
        locks = KernelLocks.from_json(t_lock.read_text())
        items = [(d.repo_id, d.version, lk.commit) for d, lk in locks.items()]
        want = [(url, KernelVersion.Version(1), commit)]
        check("lockfile.tlaloc_written.hub_reads", items == want, f"{items} != {want}")
    except Exception as e:  # noqa: BLE001
        check("lockfile.tlaloc_written.hub_reads", False, repr(e))
    # Tlaloc's own form carries variant hashes, which the hub's reader refuses by field name.
    own = work / "tlaloc.lock"
    run([tlaloc, "kernels", "lock", url + "@v1", "--lockfile", str(own), "--cache", cache])
    try:
        KernelLocks.from_json(own.read_text())
        check("lockfile.tlaloc_form.hub_refuses", False, "the hub read Tlaloc's own form")
    except Exception as e:  # noqa: BLE001
        check("lockfile.tlaloc_form.hub_refuses", "unknown field" in str(e), str(e))


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    tlaloc, work = sys.argv[1], Path(sys.argv[2])
    if work.exists():
        shutil.rmtree(work)
    repo = work / "tlaloc-named"
    make_tlaloc_repo(tlaloc, repo)
    check_variants(tlaloc, repo)
    check_metadata(tlaloc, repo, work)
    check_lockfiles(tlaloc, repo, work)
    print(f"{len(FAILURES)} failure(s)")
    sys.exit(1 if FAILURES else 0)


if __name__ == "__main__":
    main()
