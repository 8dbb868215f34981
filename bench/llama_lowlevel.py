"""What bench/llama_bench.py and bench/llama_multiseq.py share: llama.cpp through
llama-cpp-python's low-level ctypes API (the package scripts/setup.sh builds natively with
GGML_NATIVE=ON into third_party_py/), loaded without the package's high-level half, plus the
pieces llama.cpp's own llama-bench sets up around its timed calls (a persistent thread pool, quiet
logging) and the llama.cpp commit the package carries.

Not a command; imported by those scripts (which live beside it).
"""
import ctypes
import importlib.metadata
import importlib.util
import resource
import sys
import types

GGML_LOG_LEVEL_ERROR = 4  # enum ggml_log_level (ggml.h)

# llama.cpp commit each llama-cpp-python release vendors (its CHANGELOG.md: "update llama.cpp to
# ggml-org/llama.cpp@..."; the sdist's vendor/llama.cpp carries no .git). 0c1e57098 is llama.cpp
# release b11312, full hash 0c1e57098bba43ac29e6e3b677cdceebdd22334f.
LLAMA_CPP_COMMITS = {"0.3.36": "ggml-org/llama.cpp@0c1e57098 (b11312)"}


def load_llama_cpp():
    """Imports llama_cpp.llama_cpp (the ctypes bindings) without running the package's
    __init__, which would also import the high-level Llama class with numpy, jinja2 and the chat
    formats: tens of MiB of resident memory that are not llama.cpp's and would count in the peak
    RSS these benchmarks report."""
    if "llama_cpp" not in sys.modules:
        spec = importlib.util.find_spec("llama_cpp")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("cannot import llama_cpp: is llama-cpp-python installed in this "
                               "python (third_party_py/, made by scripts/setup.sh)?")
        package = types.ModuleType("llama_cpp")
        package.__path__ = list(spec.submodule_search_locations)
        package.__file__ = spec.origin
        sys.modules["llama_cpp"] = package
    import llama_cpp.llama_cpp as ll  # noqa: E402  (after the package stub above)

    return ll


def package_version():
    try:
        return importlib.metadata.version("llama_cpp_python")
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def llama_cpp_commit(version):
    return LLAMA_CPP_COMMITS.get(version, "unknown (see the package's CHANGELOG.md)")


class Logs:
    """Captures llama.cpp's log lines (it writes them to stderr otherwise): errors are passed on
    to stderr, the rest is kept for what the context decided (flash attention)."""

    def __init__(self, ll):
        self.lines = []
        self.pending = ""

        def on_log(level, text, _user_data):
            message = text.decode("utf-8", "replace") if text else ""
            self.pending += message
            if self.pending.endswith("\n"):
                self.lines.append(self.pending)
                if level == GGML_LOG_LEVEL_ERROR:
                    sys.stderr.write(self.pending)
                self.pending = ""

        self.callback = ll.llama_log_callback(on_log)  # kept alive as long as self
        ll.llama_log_set(self.callback, ctypes.c_void_p(0))

    def flash_attention(self):
        """What flash attention "auto" resolved to, from the context's log (llama.cpp resolves
        it when it creates the context and logs "Flash Attention enabled" or "... not supported,
        set to disabled")."""
        for line in self.lines:
            if "Flash Attention" in line:
                return "disabled" if "disabled" in line else "enabled"
        return "unresolved"


class _ThreadpoolParams(ctypes.Structure):
    # struct ggml_threadpool_params (ggml.h; GGML_MAX_N_THREADS = 512).
    _fields_ = [("cpumask", ctypes.c_bool * 512), ("n_threads", ctypes.c_int),
                ("prio", ctypes.c_int), ("poll", ctypes.c_uint32), ("strict_cpu", ctypes.c_bool),
                ("paused", ctypes.c_bool)]


def attach_threadpool(ll, ctx, threads):
    """Attaches one persistent ggml thread pool (ggml's defaults: hybrid polling 50, no pinning)
    to the context for both decode and batch work, as llama-bench and llama-cli do; without it
    ggml starts and joins its threads on every llama_decode. The bindings do not wrap these
    calls, so they are looked up in the package's libraries. Returns (pool, how) where pool must
    be freed with free_threadpool after the context."""
    lib_dir = ll._base_path
    try:
        base = ctypes.CDLL(str(lib_dir / "libggml-base.so"))
        cpu = ctypes.CDLL(str(lib_dir / "libggml-cpu.so"))
    except OSError as e:
        return None, f"ggml's per-call threads (no thread pool: {e})"
    params = _ThreadpoolParams()
    base.ggml_threadpool_params_init.argtypes = [ctypes.POINTER(_ThreadpoolParams), ctypes.c_int]
    base.ggml_threadpool_params_init.restype = None
    base.ggml_threadpool_params_init(ctypes.byref(params), threads)
    cpu.ggml_threadpool_new.argtypes = [ctypes.POINTER(_ThreadpoolParams)]
    cpu.ggml_threadpool_new.restype = ctypes.c_void_p
    cpu.ggml_threadpool_free.argtypes = [ctypes.c_void_p]
    cpu.ggml_threadpool_free.restype = None
    pool = cpu.ggml_threadpool_new(ctypes.byref(params))
    if not pool:
        return None, "ggml's per-call threads (ggml_threadpool_new failed)"
    attach = ll._lib.llama_attach_threadpool
    attach.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    attach.restype = None
    attach(ctx, pool, pool)
    return (cpu, pool), f"one ggml thread pool of {threads}, poll {params.poll}"


def free_threadpool(ll, ctx, pool):
    """Detaches and frees what attach_threadpool made; call before llama_free(ctx)."""
    if pool is None:
        return
    detach = ll._lib.llama_detach_threadpool
    detach.argtypes = [ctypes.c_void_p]
    detach.restype = None
    detach(ctx)
    cpu, handle = pool
    cpu.ggml_threadpool_free(handle)


def load_model(ll, path):
    """Loads a GGUF on the CPU (mmap, llama.cpp's defaults otherwise)."""
    params = ll.llama_model_default_params()
    params.n_gpu_layers = 0
    model = ll.llama_model_load_from_file(path.encode(), params)
    if not model:
        raise RuntimeError(f"llama.cpp could not load {path} (expected a GGUF file)")
    return model


def batch_add(batch, token, pos, seq, output):
    """Appends one token of sequence `seq` at position `pos` to a llama_batch made by
    llama_batch_init(capacity, 0, 1)."""
    i = batch.n_tokens
    batch.token[i] = token
    batch.pos[i] = pos
    batch.n_seq_id[i] = 1
    batch.seq_id[i][0] = seq
    batch.logits[i] = 1 if output else 0
    batch.n_tokens = i + 1


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def parse_flags(argv, defaults, positive, usage):
    """Fills a copy of `defaults` from "--flag value" pairs (flag names are the keys with "_" as
    "-"; values take the default's type); every key in `positive` must be a positive integer."""
    opts = dict(defaults)
    i = 0
    while i < len(argv):
        flag = argv[i]
        if flag in ("-h", "--help"):
            print(usage.strip())
            sys.exit(0)
        key = flag[2:].replace("-", "_") if flag.startswith("--") else None
        if key not in opts or i + 1 >= len(argv):
            raise ValueError(f"unknown or incomplete option {flag} (usage: {usage.strip()})")
        kind = type(opts[key]) if opts[key] is not None else str
        try:
            opts[key] = kind(argv[i + 1])
        except ValueError:
            raise ValueError(f"{flag} {argv[i + 1]}: expected {kind.__name__}") from None
        i += 2
    if not opts.get("model"):
        raise ValueError("--model FILE.gguf is required")
    for key in positive:
        if opts[key] < 1:
            raise ValueError(f"--{key.replace('_', '-')} must be a positive integer")
    return opts
