"""The Python side of `--dut python:TARGET:FUNCTION[:key=value...]`.

libswa_python_dut.so (python_dut.cpp) embeds the interpreter in the plugin worker, imports this
module once, calls load() once, and then call() for each call of the ABI (swa/dut_v2.h): supports,
prefill, each chunk, each decode step. The user's kernel is a plain function of one argument, the
call's params (README.md in this folder is its contract). Nothing here is a public API.
"""
import ctypes
import faulthandler
import importlib
import importlib.util
import inspect
import os
import re
import sys
import threading
import time
import traceback
import types
import zlib

import numpy as np

# The storage dtypes as NumPy sees them: bfloat16 has no NumPy type, so its arrays hold the bits.
_NUMPY_DTYPE = {"fp32": np.float32, "fp16": np.float16, "bf16": np.uint16}
_FEATURES = ("sinks", "softcap", "two-sided")
_LIST_KEYS = ("dtypes", "modes", "cache_policies", "kv_formats", "mask_formats")
_DESCRIBE_KEYS = ("name", "head_sizes", "features", "query_tile", "key_tile", "cache_private") + _LIST_KEYS
_TRACEBACKS_SHOWN = 3
_INT32_MAX = 2**31 - 1  # query_tile and key_tile are int32_t in swa_dut_v2_traits
_SUPPORTS_ANSWERS = "True, False, None, or a string (a decline, the string its reason)"


class LoadError(Exception):
    """What is wrong with the target, for the harness's refusal (exit 2)."""


class _KernelExit(BaseException):
    """os._exit() called by the user's code in the process that loaded it (see _exit_guard)."""

    def __init__(self, status):
        super().__init__(f"called os._exit({status})")
        self.status = status


def _text(value, limit=None):
    """`value` as text that crosses to C++ intact: str() of it (or what str() raised), every character
    UTF-8 can encode kept, the others (a lone surrogate) written as backslash escapes."""
    try:
        text = value if isinstance(value, str) else str(value)
    except BaseException as e:  # noqa: B036 - a __str__ that raises (or exits) still gets a message
        try:
            text = f"<str() of the {type(value).__name__} raised {type(e).__name__}>"
        except BaseException:  # noqa: B036
            text = "<str() failed>"
    if not isinstance(text, str):  # a str subclass's __str__ may return anything
        text = "<str() did not return text>"
    text = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return text if limit is None or len(text) <= limit else text[:limit] + "..."


def _shown(value, limit=60):
    """repr() of a value a kernel returned, safe to show: its type where repr() itself fails."""
    try:
        shown = repr(value)
    except BaseException:  # noqa: B036
        shown = f"<a {type(value).__name__} whose repr() raised>"
    return _text(shown, limit)


class _exit_guard:
    """While the user's code runs (its import, describe(), supports(), the function), os._exit() in
    the process that loaded it raises _KernelExit instead of ending the process: under --in-process
    that process is the harness, which would end with status 0 and no rows. In another process (a
    child the kernel forked: multiprocessing ends its children with os._exit) it still exits."""

    def __init__(self, pid):
        self.pid = pid

    def __enter__(self):
        self.saved = os._exit
        real, pid = self.saved, self.pid

        def _exit(status):
            if os.getpid() != pid:
                real(status)
            raise _KernelExit(status)

        os._exit = _exit
        return self

    def __exit__(self, *exc):
        os._exit = self.saved
        return False


class _Target:
    def __init__(self):
        self.function = None
        self.kwargs = {}
        self.supports = None
        self.described = {}
        self.label = ""
        self.pending = None  # an exception supports() raised, reported by the scenario's first call
        self.wall_ms = None  # the last call's wall time around the function, in ms (exec_adapter.py --time)
        self.tracebacks = 0
        self.pid = os.getpid()  # the process that loaded it (_exit_guard)


def _printable_streams():
    """A kernel's print() of any text works in the plugin's worker as under `python3`: an embedding
    process that never set its locale gives Python ASCII streams (print("\u00e9") would raise);
    they become UTF-8, and what UTF-8 cannot encode (a lone surrogate) is escaped. The harness
    cleans what the worker prints before showing it."""
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and stream.encoding.lower() in ("ascii", "ansi_x3.4-1968", "us-ascii"):
                stream.reconfigure(encoding="utf-8", errors="backslashreplace")
        except (AttributeError, ValueError, OSError):
            pass  # a replaced stream: the kernel's own


if __name__ == "_swa_python_dut":  # loaded by the python: plugin (python_dut.cpp), not by swa_harness
    _printable_streams()

_targets = {}  # spec -> _Target: a worker hosts one; the swa_harness module in a test session hosts many
faulthandler.enable()  # a kernel that crashes the worker leaves its Python stack on stderr


def _parse_value(text):
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return text


def _import_target(target):
    """A module by dotted name (searched from the working folder first), or a .py file by path."""
    if target.endswith(".py") or os.sep in target:
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise LoadError(f"no Python file {path}")
        name = os.path.splitext(os.path.basename(path))[0]
        for module in list(sys.modules.values()):  # already imported (a test that imports the kernel): the same one
            if os.path.abspath(getattr(module, "__file__", None) or "") == path:
                return module
        sys.path.insert(0, os.path.dirname(path))  # its siblings import as they would under `python3 FILE`
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        spec.loader.exec_module(module)
        return module
    if not all(part.isidentifier() for part in target.split(".")):
        raise LoadError(f"'{target}' is neither a module name (a.b.c) nor a path to a .py file")
    sys.path.insert(0, os.getcwd())
    return importlib.import_module(target)


def _split_spec(spec):
    """TARGET, FUNCTION and the key=value items of TARGET:FUNCTION[:key=value...]. A TARGET that is a
    .py file whose path holds ':' (python:/data/run:3/k.py:f) is the longest prefix of the spec
    ending in .py, followed by ':', that is a file; else TARGET ends at the first ':'."""
    ends = sorted((m.end() for m in re.finditer(r"\.py(?=:)", spec) if ":" in spec[:m.end()]), reverse=True)
    for end in ends:
        if os.path.isfile(spec[:end]):
            return [spec[:end]] + spec[end + 1:].split(":")
    if spec.endswith(".py") and ":" in spec and os.path.isfile(spec):
        raise LoadError(f"'python:{spec}' names the file {spec} but no FUNCTION: python:TARGET:FUNCTION[:key=value...]")
    parts = spec.split(":")
    if ends and len(parts) > 1 and not parts[1].isidentifier():  # FUNCTION would be "3/k.py": a path was meant
        raise LoadError(f"no Python file {os.path.abspath(spec[:ends[0]])}")
    return parts


def _names(value, key, allowed):
    if isinstance(value, str):
        value = [value]
    try:
        items = list(value)
    except TypeError:
        raise LoadError(f"describe()['{key}'] must be a list of names from {'|'.join(allowed)}") from None
    for item in items:
        if item not in allowed:
            raise LoadError(f"describe()['{key}']: {_shown(item, 42)} is not one of {'|'.join(allowed)}")
    return items


def _check_description(d, choices):
    if not isinstance(d, dict):
        raise LoadError(f"describe() must return a dict, not {type(d).__name__}")
    out = {}
    for key, value in d.items():
        if key not in _DESCRIBE_KEYS:
            raise LoadError(f"describe() returned the key {_shown(key, 42)}; allowed: {', '.join(_DESCRIBE_KEYS)}")
        if key in _LIST_KEYS:
            out[key] = _names(value, key, choices[key])
        elif key == "features":
            out[key] = _names(value, key, _FEATURES)
        elif key == "head_sizes":
            sizes = list(value) if not isinstance(value, int) else [value]
            if len(sizes) > 16 or not all(isinstance(s, int) and 0 < s < 100000 for s in sizes):
                raise LoadError("describe()['head_sizes'] must be at most 16 head sizes (integers 1..99999)")
            out[key] = sorted(sizes)
        elif key == "name":
            out[key] = _text(value, 63)  # the traits' char[64]
        elif key == "cache_private":
            out[key] = bool(value)
        elif isinstance(value, bool) or not isinstance(value, (int, np.integer)) or not 0 <= value <= _INT32_MAX:
            raise LoadError(f"describe()['{key}'] must be an integer 0..{_INT32_MAX}, not {_shown(value, 40)}")
        else:
            out[key] = int(value)
    return out


def load(spec, choices):
    """load_target's answer; any error it meets (the import's own: a missing module, a syntax error,
    an exception at import time) as a LoadError of one line naming the user's file and line."""
    try:
        return _load_target(spec, choices)
    except LoadError as e:
        raise LoadError(_text(e)) from None
    except BaseException as e:  # noqa: B036 - a module that calls exit() at import cannot be loaded either
        frames = [f for f in traceback.extract_tb(e.__traceback__)
                  if "importlib" not in f.filename and f.filename != __file__]
        where = f" (at {os.path.basename(frames[-1].filename)}:{frames[-1].lineno})" if frames else ""
        what = _text(e) if isinstance(e, _KernelExit) else f"{type(e).__name__}: {_text(e)}"
        raise LoadError(_text(what + where)) from None


def _load_target(spec, choices):
    """Imports TARGET, finds FUNCTION, checks the key=value arguments against its signature and reads
    the module's describe(). Returns the description (a dict); raises LoadError or the import's error."""
    parts = _split_spec(spec)
    if len(parts) < 2 or not parts[0] or not parts[1]:
        raise LoadError(f"'python:{spec}' is not python:TARGET:FUNCTION[:key=value...] (TARGET a module or a .py file)")
    target, function = parts[0], parts[1]
    kwargs = {}
    for item in parts[2:]:
        key, eq, value = item.partition("=")
        if not eq or not key.isidentifier():
            raise LoadError(f"'{item[:60]}' in python:{spec} is not key=value (key a Python identifier)")
        kwargs[key] = _parse_value(value)
    guard = _exit_guard(os.getpid())
    with guard:
        module = _import_target(target)
    fn = getattr(module, function, None)
    if not callable(fn):
        found = ", ".join(n for n, v in vars(module).items() if inspect.isfunction(v) and not n.startswith("_"))
        raise LoadError(f"{target} has no function {function} (its functions: {found or 'none'})")
    try:
        inspect.signature(fn).bind(None, **kwargs)
    except TypeError as e:
        raise LoadError(f"{function}(params, **{kwargs}) does not match its signature: {e}") from None
    except ValueError:
        pass  # a builtin without a signature: trust it
    describe = getattr(module, "describe", None)
    with guard:
        described = _check_description(describe() if callable(describe) else (describe or {}), choices)
    supports = getattr(module, "supports", None)
    target = _Target()
    target.function, target.kwargs, target.described = fn, kwargs, described
    target.supports = supports if callable(supports) else None
    target.label = f"python:{spec}"
    _targets[spec] = target
    qualified = f"{getattr(module, '__name__', target).rsplit('.', 1)[-1]}.{function}"
    described.setdefault("name", qualified if len(qualified) <= 32 else function[:32])
    return described


_views = {}  # the views of the current schedule's memory: its calls share them


def _view(address, dtype, shape, strides, writable):
    """A NumPy array over the harness's memory at `address` (strides in elements), without a copy."""
    shape = tuple(int(n) for n in shape)
    if address == 0:
        return None
    key = (address, np.dtype(dtype).char, shape, tuple(strides), writable)
    known = _views.get(key)
    if known is not None:
        return known
    if len(_views) > 64:
        _views.clear()
    _views[key] = _new_view(address, dtype, shape, strides, writable)
    return _views[key]


def _new_view(address, dtype, shape, strides, writable):
    item = np.dtype(dtype).itemsize
    if any(n == 0 for n in shape):
        return np.zeros(shape, dtype)
    span = 1 + sum((n - 1) * s for n, s in zip(shape, strides))
    flat = np.frombuffer((ctypes.c_char * (span * item)).from_address(address), dtype=dtype, count=span)
    return np.lib.stride_tricks.as_strided(flat, shape, [s * item for s in strides], writeable=writable)


# The harness's schedule (dut/api/src/kv_cache.cpp, run_schedule.cpp), the one Python copy of it:
# the glue's p.positions and exec_adapter.py's replay of a request both use these.
def chunk_sizes(prompts, chunk):
    """Each sequence's chunk in a chunked prefill: the case's chunk, or its whole prompt where 0."""
    return np.where(chunk > 0, chunk, np.asarray(prompts, dtype=np.int64))


def schedule(mode, prompts, chunk, decode_steps):
    """A case's calls in order, as (call, index): one prefill; or the chunks the longest prompt
    needs, then (decode) the steps."""
    if mode == "prefill":
        return [("prefill", 0)]
    prompts = np.asarray(prompts, dtype=np.int64)
    sizes = np.maximum(chunk_sizes(prompts, chunk), 1)
    chunks = int((-(-prompts // sizes)).max(initial=0))
    steps = decode_steps if mode == "decode" else 0
    return [("chunked_prefill", c) for c in range(chunks)] + [("decode_step", t) for t in range(steps)]


def _positions(p, call, index):
    """Per sequence, the positions [begin, end) this call computes, as an int64 array [batch, 2]."""
    lens = np.asarray(p.seq_lens, dtype=np.int64)
    if call in ("prefill", "supports"):
        return np.stack([np.zeros_like(lens), lens], axis=1)
    prompts = lens - p.decode_steps if p.mode == "decode" else lens
    if call == "decode_step":
        return np.stack([prompts + index, prompts + index + 1], axis=1)
    sizes = chunk_sizes(prompts, p.chunk)
    return np.stack([np.minimum(prompts, index * sizes), np.minimum(prompts, (index + 1) * sizes)], axis=1)


# ---- torch tensors of a call (p.torch(name), p.tensors(); README.md "PyTorch") ----------------------
# The glue never imports torch unless a kernel asks for a tensor. On the CPU a tensor shares the
# harness's memory (no copy); the read-only inputs get a writable alias (torch has no read-only
# tensors: torch.from_numpy of a read-only array warns, DLPack refuses it), and each one handed out
# is checksummed before and after the call, so a kernel that writes into one is the row's error,
# naming it. On another device (device="cuda") a tensor is a copy; the writable ones (p.out, the
# cache) are copied back after the call.
_P_TENSORS = ("q", "k", "v", "out", "seq_lens", "seq_offsets", "mask", "sinks", "positions")
_CACHE_TENSORS = ("k", "v", "base", "tokens_written", "page_table")
_TORCH_NAMES = _P_TENSORS + tuple("cache." + n for n in _CACHE_TENSORS)
_TORCH_MISSING = "PyTorch is not installed here (Debian: apt-get install python3-torch)"


class Params(types.SimpleNamespace):
    """A call's params: every field of swa_dut_v2_params by its name, the tensors as NumPy views
    (README.md), and the same tensors as torch tensors through torch() and tensors()."""
    __slots__ = ("_handed",)

    def torch(self, name, device=None):
        """The tensor `name` (q, k, v, out, seq_lens, seq_offsets, mask, sinks, positions, or
        cache.k, cache.v, cache.base, cache.tokens_written, cache.page_table) as a torch tensor:
        None where the NumPy attribute is None. bf16 is torch.bfloat16; FP8 cache codes uint8 (or
        torch.float8_e4m3fn / float8_e5m2 where torch has them). device None or "cpu": no copy;
        another device: a copy there, p.out and the cache copied back after the call."""
        return _torch_tensor(self, name, device)

    def tensors(self, device=None):
        """The call's tensors as torch tensors, by attribute: q, k, v, out, seq_lens, seq_offsets,
        mask, sinks, positions and cache (None in prefill; else its k, v, base, tokens_written,
        page_table). Each is made when first read, as p.torch(name, device) makes it: an input
        never read is neither converted nor checksummed."""
        return _Tensors(self, device, "")


class CacheParams(types.SimpleNamespace):
    """p.cache: its fields and arrays; torch(name) is p.torch("cache." + name)."""
    __slots__ = ("_owner",)

    def torch(self, name, device=None):
        return _torch_tensor(self._owner, "cache." + name, device)


class _Tensors:
    """p.tensors(): each tensor made by p.torch() on its first read."""

    def __init__(self, p, device, prefix):
        self._p, self._device, self._prefix = p, device, prefix

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        if name == "cache" and not self._prefix:
            value = None if self._p.cache is None else _Tensors(self._p, self._device, "cache.")
        elif self._prefix + name in _TORCH_NAMES:
            value = _torch_tensor(self._p, self._prefix + name, self._device)
        else:
            names = _CACHE_TENSORS if self._prefix else _P_TENSORS + ("cache",)
            raise AttributeError(f"p.tensors(){'.cache' if self._prefix else ''} has no {name!r}; "
                                 f"its tensors: {', '.join(names)}")
        self.__dict__[name] = value
        return value

    def __dir__(self):
        return list(_CACHE_TENSORS if self._prefix else _P_TENSORS + ("cache",))


class _Handed:
    """The torch tensors a call was given: by (name, device), the read-only inputs' checksums, the
    device copies to write back."""

    def __init__(self):
        self.tensors = {}
        self.checks = []  # (name, read-only NumPy view, crc32 before the call)
        self.write_back = []  # (CPU tensor over the harness's memory, the device copy)


def _torch_module():
    try:
        import torch
    except ImportError:
        raise ImportError(_TORCH_MISSING) from None
    return torch


def _writable_alias(array):
    """A writable NumPy array over the memory of `array` (no copy)."""
    if array.flags.writeable:
        return array
    if array.size == 0:
        return np.zeros(array.shape, array.dtype)
    item = array.itemsize
    return _new_view(array.__array_interface__["data"][0], array.dtype, array.shape,
                     [s // item for s in array.strides], True)


def _checksum(array):
    return zlib.crc32(array if array.flags.c_contiguous else np.ascontiguousarray(array))


def _torch_tensor(p, name, device):
    if name not in _TORCH_NAMES:
        raise ValueError(f"p.torch({name!r}): not a tensor of the call; the names: {', '.join(_TORCH_NAMES)}")
    torch = _torch_module()
    device = None if device is None else torch.device(device)
    on_cpu = device is None or device.type == "cpu"
    key = (name, None if on_cpu else str(device))
    handed = p._handed
    if key in handed.tensors:
        return handed.tensors[key]
    owner, field = (p.cache, name[6:]) if name.startswith("cache.") else (p, name)
    array = None if owner is None else getattr(owner, field)
    if array is None:
        handed.tensors[key] = None
        return None
    codes = owner is p.cache and field in ("k", "v") and p.cache.kv_format != "dtype"
    bf16 = array.dtype == np.uint16 and not codes  # storage dtype bf16: its bits
    if not array.flags.writeable and on_cpu and array.size:
        handed.checks.append((name, array, _checksum(array)))
    host = _writable_alias(array)
    tensor = torch.from_numpy(host.view(np.int16) if bf16 else host)
    if bf16:
        tensor = tensor.view(torch.bfloat16)
    elif codes:
        fp8 = getattr(torch, "float8_e4m3fn" if p.cache.kv_format == "fp8-e4m3" else "float8_e5m2", None)
        if fp8 is not None:  # torch 2.1 and later: the same OCP encodings as the harness's codes
            tensor = tensor.view(fp8)
    if not on_cpu:
        copy = tensor.to(device)
        if array.flags.writeable:
            handed.write_back.append((tensor, copy))
        tensor = copy
    handed.tensors[key] = tensor
    return tensor


def _finish_torch(p, what):
    """After the call: the device copies of the writable tensors written back, and the read-only
    inputs checked. "" or why the call is an error."""
    handed = p._handed
    try:
        for host, copy in handed.write_back:
            host.copy_(copy)
    except Exception as e:  # noqa: BLE001 - the device failed, or the kernel resized the copy
        return f"{what}: its torch tensors on {copy.device} cannot be copied back: {type(e).__name__}: {_text(e)}"
    for name, array, before in handed.checks:
        if _checksum(array) != before:
            return f"{what} wrote into the read-only input p.{name} (through the tensor p.torch('{name}') gave it; " \
                   f"the inputs are shared with the harness: write into a copy, p.torch('{name}').clone())"
    return ""


def _as_array(result):
    """A kernel's returned value as a NumPy array: a torch tensor (any device, bf16 too) as float32."""
    if type(result).__module__.startswith("torch") and hasattr(result, "detach"):
        import torch
        if result.dtype.is_floating_point:
            return result.detach().to("cpu", torch.float32).numpy()
        return result.detach().cpu().numpy()
    return np.asarray(result)


def _params(fields, call, index, cache):
    """The call's params: every field of swa_dut_v2_params by its name, the tensors as arrays."""
    p = Params(**fields)
    p._handed = _Handed()
    n = int(_view(fields["seq_offsets"], np.int64, (fields["batch"] + 1,), (1,), False)[-1])
    dt = _NUMPY_DTYPE[p.dtype]
    d = p.head_size
    p.q = _view(fields["q"], dt, (n, p.heads_q, d), (p.q_row_stride, p.q_head_stride, 1), False)
    p.k = _view(fields["k"], dt, (n, p.heads_kv, d), (p.k_row_stride, p.k_head_stride, 1), False)
    p.v = _view(fields["v"], dt, (n, p.heads_kv, d), (p.v_row_stride, p.v_head_stride, 1), False)
    p.out = _view(fields["out"], dt, (n, p.heads_q, d), (p.out_row_stride, p.out_head_stride, 1), True)
    p.seq_lens = _view(fields["seq_lens"], np.int32, (p.batch,), (1,), False)
    p.seq_offsets = _view(fields["seq_offsets"], np.int64, (p.batch + 1,), (1,), False)
    p.mask = _view(fields["mask"], np.float32, (p.mask_rows, p.mask_rows), (p.mask_rows, 1), False)
    p.sinks = _view(fields["sinks"], np.float32, (p.heads_q,), (1,), False)
    p.call, p.index, p.kernel_ms = call, index, None
    p.positions = _positions(p, call, index)
    p.cache = None if cache is None else _cache(cache, p)
    return p


def _cache(c, p):
    cache = CacheParams(**c)
    cache._owner = p
    codes = cache.kv_format != "dtype"
    dt = np.uint8 if codes else _NUMPY_DTYPE[cache.dtype]
    rows, per_row = (cache.pages, cache.page_size) if cache.policy == "paged" else (cache.batch, cache.slots)
    shape = (rows, per_row, cache.heads_kv, cache.head_size)
    strides = (per_row * cache.heads_kv * cache.head_size, cache.heads_kv * cache.head_size, cache.head_size, 1)
    cache.k = _view(c["k"], dt, shape, strides, True)
    cache.v = _view(c["v"], dt, shape, strides, True)
    cache.base = _view(c["base"], np.int64, (cache.batch,), (1,), True)
    cache.tokens_written = _view(c["tokens_written"], np.int64, (cache.batch,), (1,), True)
    cache.page_table = _view(c["page_table"], np.int32, (cache.batch, cache.table_width), (cache.table_width, 1), False)
    return cache


def _outside(target, fields):
    """Why the case is outside the description's KV formats or features ("" when inside)."""
    d = target.described
    if "kv_formats" in d and fields["kv_format"] not in d["kv_formats"]:
        return f"it describes KV formats {', '.join(d['kv_formats']) or 'none'}, not {fields['kv_format']}"
    features = d.get("features", _FEATURES)
    for used, feature in ((fields["sinks"] != 0, "sinks"), (fields["softcap"] > 0, "softcap"),
                          (fields["window_right"] != 0, "two-sided")):
        if used and feature not in features:
            return f"it does not describe {feature}" + (" windows" if feature == "two-sided" else "")
    return ""


def _where(error):
    frames = [f for f in traceback.extract_tb(error.__traceback__) if f.filename != __file__]
    if not frames:
        return ""
    f = frames[-1]
    return f" (at {os.path.basename(f.filename)}:{f.lineno} in {f.name})"


def _describe_error(target, error, what):
    if target.tracebacks < _TRACEBACKS_SHOWN:
        print(f"{target.label}: {what} raised:", file=sys.stderr)
        traceback.print_exception(type(error), error, error.__traceback__, file=sys.stderr)
        target.tracebacks += 1
        if target.tracebacks == _TRACEBACKS_SHOWN:
            print(f"{target.label}: later tracebacks are not printed (the rows keep each message)", file=sys.stderr)
        sys.stderr.flush()
    if isinstance(error, _KernelExit):
        return f"{what} {error}{_where(error)}"
    text = _text(error)
    return f"{what} raised {_text(type(error).__name__)}" + (f": {text}" if text else "") + _where(error)


def _to_out(target, p, result):
    """Copies the rows this call owns from a returned array into p.out, rounded to the storage dtype."""
    got = _as_array(result)
    if got.shape != p.out.shape:
        return f"{target.function.__name__} returned an array of shape {got.shape}; p.out is {p.out.shape} " \
               "(return None after filling p.out, or an array of its shape)"
    if p.out.dtype == np.uint16 and got.dtype != np.uint16:  # bf16: round to nearest even, keep the bits
        bits = np.ascontiguousarray(got, dtype=np.float32).view(np.uint32).astype(np.uint64)
        nan = np.isnan(got)
        got = (((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16) & 0xFFFF).astype(np.uint16)
        got[nan] = 0x7FC0
    for b in range(p.batch):
        first = int(p.seq_offsets[b])
        begin, end = (int(x) for x in p.positions[b])
        p.out[first + begin:first + end] = got[first + begin:first + end]
    return ""


def _leaked(before):
    """The threads a call started and left running (a thread that ends within 50 ms is not one)."""
    left = [t for t in threading.enumerate() if t not in before and t.is_alive()]
    deadline = time.monotonic() + 0.05
    for t in left:
        t.join(max(0.0, deadline - time.monotonic()))
    return [t for t in left if t.is_alive()]


def call(spec, op, index, fields, cache):
    """One ABI call of the target loaded as `spec`. Returns (rc, message, kernel_ms) with the ABI's
    meaning of rc for `op`; the message is text C++ can read (_text)."""
    target = _targets[spec]
    with _exit_guard(target.pid):
        rc, message, ms = _call(target, op, index, fields, cache)
    return int(rc), _text(message), float(ms)


def _supports_answer(answer):
    """(rc, message) for what supports(p) returned; None where it is not an answer the glue reads."""
    if answer is None:
        return 1, ""
    if isinstance(answer, (bool, np.bool_)):
        return (1, "") if bool(answer) else (0, "declined by supports()")
    if isinstance(answer, str):
        return 0, _text(answer, 400) or "declined by supports()"
    return None


def _call(target, op, index, fields, cache):
    if op == "supports":
        target.pending = None
        why = _outside(target, fields)
        if why:
            return 0, why, -1.0
        if target.supports is None:
            return 1, "", -1.0
        p = _params(fields, op, index, cache)
        try:
            answer = target.supports(p)
        except BaseException as e:  # noqa: B036 - a kernel's exit() or Ctrl-C is its failure, not ours
            target.pending = _describe_error(target, e, "supports()")
            return 1, "", -1.0
        wrote = _finish_torch(p, "supports()")
        if wrote:
            target.pending = wrote
            return 1, "", -1.0
        read = _supports_answer(answer)
        if read is None:
            target.pending = f"supports() returned {_shown(answer)} (a {_text(type(answer).__name__)}); " \
                             f"it must return {_SUPPORTS_ANSWERS}"
            return 1, "", -1.0
        return read[0], read[1], -1.0
    if target.pending:
        message, target.pending = target.pending, None
        return 1, message, -1.0
    p = _params(fields, op, index, cache)
    before = set(threading.enumerate())
    target.wall_ms = None
    start = time.perf_counter()
    try:
        result = target.function(p, **target.kwargs)
    except BaseException as e:  # noqa: B036
        return 1, _describe_error(target, e, f"{target.function.__name__}()"), -1.0
    target.wall_ms = (time.perf_counter() - start) * 1e3  # exec_adapter.py --time reads it; never the kernel's time
    leaked = _leaked(before)
    if leaked:
        names = ", ".join(t.name for t in leaked[:4])
        return 1, f"{target.function.__name__}() left {len(leaked)} thread(s) running after it returned: {names} " \
                  "(join every thread it starts before returning)", -1.0
    wrote = _finish_torch(p, f"{target.function.__name__}()")  # first: p.out's device copy comes back
    if wrote:
        return 1, wrote, -1.0
    if result is not None:
        try:
            why = _to_out(target, p, result)
        except Exception as e:  # noqa: BLE001
            why = f"its return value cannot be written to p.out: {type(e).__name__}: {e}"
        if why:
            return 1, why, -1.0
    own = p.kernel_ms
    if own is not None and (isinstance(own, bool) or not isinstance(own, (int, float, np.integer, np.floating))
                            or not own >= 0 or own == float("inf")):
        return 1, f"p.kernel_ms must be None or a non-negative number of milliseconds, not {_shown(own)}", -1.0
    # No time of the kernel's own: -1, "not timed", and the harness times the call on its own clock
    # (the row's timer says which). The worker's wall time of the call is not reported as the kernel's.
    return 0, "", float(own) if own is not None else -1.0
