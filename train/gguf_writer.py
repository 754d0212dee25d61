"""A small GGUF (version 3) writer, written for Channel from the format description.

Only what Channel's exports need: scalar / string / array metadata and
F32, F16, BF16 and Q8_0 tensors.  numpy only.

    w = GGUFWriter()
    w.add("general.architecture", "gemma3")            # type inferred
    w.add("foo.count", 3, "u32")                          # or explicit
    w.add_tensor("token_embd.weight", array2d, "q8_0")    # numpy shape (rows, cols)
    w.write("model.gguf")

Tensor shapes are given numpy-style (outermost first); GGUF stores ne
reversed (ne[0] = the contiguous, innermost dimension).
"""
import struct

import numpy as np

ALIGN = 32

# metadata value types
T_U8, T_I8, T_U16, T_I16, T_U32, T_I32, T_F32, T_BOOL, T_STR, T_ARR, T_U64, T_I64, T_F64 = range(13)
SCALAR_FMT = {T_U8: "<B", T_I8: "<b", T_U16: "<H", T_I16: "<h", T_U32: "<I", T_I32: "<i",
              T_F32: "<f", T_BOOL: "<?", T_U64: "<Q", T_I64: "<q", T_F64: "<d"}
TYPE_NAMES = {"u8": T_U8, "i8": T_I8, "u16": T_U16, "i16": T_I16, "u32": T_U32, "i32": T_I32,
              "f32": T_F32, "bool": T_BOOL, "str": T_STR, "u64": T_U64, "i64": T_I64, "f64": T_F64}

# ggml tensor types
GGML_F32, GGML_F16, GGML_Q8_0, GGML_BF16 = 0, 1, 8, 30
QK8_0 = 32


def _str(s):
    b = s.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def _infer(v):
    if isinstance(v, bool):
        return T_BOOL
    if isinstance(v, int):
        return T_U32 if 0 <= v < 2 ** 32 else T_I64
    if isinstance(v, float):
        return T_F32
    if isinstance(v, str):
        return T_STR
    raise TypeError("cannot infer GGUF type of %r" % (v,))


def _scalar(t, v):
    if t == T_STR:
        return _str(v)
    return struct.pack(SCALAR_FMT[t], v)


def quantize_q8_0(x):
    """Row-major float array (rows, cols), cols % 32 == 0 -> Q8_0 bytes.

    Per block of 32: d = max|x| / 127 stored as f16, q = round-half-away(x / d).
    """
    x = np.asarray(x, dtype=np.float32)
    assert x.shape[-1] % QK8_0 == 0, "Q8_0 needs the row length to be a multiple of 32"
    blocks = x.reshape(-1, QK8_0)
    amax = np.abs(blocks).max(axis=1)
    d = amax / 127.0
    inv = np.where(d > 0, 1.0 / np.where(d > 0, d, 1.0), 0.0).astype(np.float32)
    v = blocks * inv[:, None]
    q = (np.sign(v) * np.floor(np.abs(v) + 0.5)).clip(-127, 127).astype(np.int8)
    out = np.empty(blocks.shape[0], dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    out["d"] = d.astype(np.float16)
    out["qs"] = q
    return out.tobytes()


def dequantize_q8_0(raw, shape):
    a = np.frombuffer(raw, dtype=[("d", "<f2"), ("qs", "i1", (QK8_0,))])
    return (a["d"].astype(np.float32)[:, None] * a["qs"].astype(np.float32)).reshape(shape)


def _bf16_bytes(x):
    u = np.asarray(x, dtype=np.float32).view(np.uint32)
    r = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even
    return r.tobytes()


class GGUFWriter:
    def __init__(self):
        self.kv = []        # (key, bytes)
        self.tensors = []   # (name, shape, ggml_type, bytes)

    def add(self, key, value, type_name=None):
        if isinstance(value, (list, tuple)):
            if type_name is None:
                et = _infer(value[0]) if value else T_U32
            else:
                et = TYPE_NAMES[type_name]
            body = struct.pack("<IQ", et, len(value))
            if et == T_STR:
                body += b"".join(_str(s) for s in value)
            else:
                body += np.asarray(value, dtype=np.dtype(SCALAR_FMT[et])).tobytes()
            self.kv.append((key, struct.pack("<I", T_ARR) + body))
        else:
            t = TYPE_NAMES[type_name] if type_name else _infer(value)
            self.kv.append((key, struct.pack("<I", t) + _scalar(t, value)))

    def add_tensor(self, name, array, kind="f32"):
        a = np.ascontiguousarray(array, dtype=np.float32)
        if kind == "f32":
            t, raw = GGML_F32, a.tobytes()
        elif kind == "f16":
            t, raw = GGML_F16, a.astype(np.float16).tobytes()
        elif kind == "bf16":
            t, raw = GGML_BF16, _bf16_bytes(a)
        elif kind == "q8_0":
            t, raw = GGML_Q8_0, quantize_q8_0(a)
        else:
            raise ValueError(kind)
        self.tensors.append((name, a.shape, t, raw))

    def write(self, path):
        names = [k for k, _ in self.kv]
        assert len(names) == len(set(names)), "duplicate metadata key"
        head = bytearray(b"GGUF")
        head += struct.pack("<IQQ", 3, len(self.tensors), len(self.kv))
        for k, v in self.kv:
            head += _str(k) + v
        offset = 0
        offsets = []
        for name, shape, t, raw in self.tensors:
            ne = list(reversed(shape))
            head += _str(name) + struct.pack("<I", len(ne))
            head += b"".join(struct.pack("<Q", n) for n in ne)
            head += struct.pack("<IQ", t, offset)
            offsets.append(offset)
            offset += len(raw)
            offset = (offset + ALIGN - 1) // ALIGN * ALIGN
        with open(path, "wb") as f:
            f.write(head)
            f.write(b"\0" * ((-len(head)) % ALIGN))
            pos = 0
            for (name, shape, t, raw), off in zip(self.tensors, offsets):
                f.write(b"\0" * (off - pos))
                f.write(raw)
                pos = off + len(raw)
            f.write(b"\0" * ((-pos) % ALIGN))


def read_gguf(path):
    """Minimal reader (for tests): returns (metadata dict, {name: (ne, type, bytes)})."""
    data = open(path, "rb").read()
    pos = 0

    def rd(fmt):
        nonlocal pos
        v = struct.unpack_from(fmt, data, pos)
        pos += struct.calcsize(fmt)
        return v[0]

    def rstr():
        nonlocal pos
        n = rd("<Q")
        s = data[pos:pos + n].decode("utf-8")
        pos += n
        return s

    def rval(t):
        if t == T_STR:
            return rstr()
        if t == T_ARR:
            et, n = rd("<I"), rd("<Q")
            return [rval(et) for _ in range(n)]
        return rd(SCALAR_FMT[t])

    assert data[:4] == b"GGUF"
    pos = 4
    ver, nt, nkv = rd("<I"), rd("<Q"), rd("<Q")
    assert ver == 3
    meta = {}
    for _ in range(nkv):
        k = rstr()
        meta[k] = rval(rd("<I"))
    infos = []
    for _ in range(nt):
        name = rstr()
        nd = rd("<I")
        ne = [rd("<Q") for _ in range(nd)]
        t, off = rd("<I"), rd("<Q")
        infos.append((name, ne, t, off))
    base = (pos + ALIGN - 1) // ALIGN * ALIGN
    tens = {}
    for name, ne, t, off in infos:
        n = int(np.prod(ne))
        size = {GGML_F32: 4 * n, GGML_F16: 2 * n, GGML_BF16: 2 * n, GGML_Q8_0: n // 32 * 34}[t]
        tens[name] = (ne, t, data[base + off: base + off + size])
    return meta, tens


def tensor_to_numpy(ne, t, raw):
    shape = tuple(reversed(ne))
    if t == GGML_F32:
        return np.frombuffer(raw, dtype=np.float32).reshape(shape)
    if t == GGML_F16:
        return np.frombuffer(raw, dtype=np.float16).astype(np.float32).reshape(shape)
    if t == GGML_BF16:
        u = np.frombuffer(raw, dtype=np.uint16).astype(np.uint32) << 16
        return u.view(np.float32).reshape(shape)
    if t == GGML_Q8_0:
        return dequantize_q8_0(raw, shape)
    raise ValueError(t)
