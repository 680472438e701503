#!/usr/bin/env python3
"""Writes the seed corpora under corpus/<harness>/: a few small valid files and edge cases per format.
Run from anywhere: python3 tests/fuzz/make_corpus.py (needs Pillow for the JPEG and PNG seeds)."""
import gzip, io, json, os, struct, sys, zlib

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.join(here, "corpus")


def put(harness, name, data):
    d = os.path.join(root, harness)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def safetensors(tensors, metadata):
    header, buf = {}, b""
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buf), len(buf) + len(data)]}
        buf += data
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    return struct.pack("<Q", len(h)) + h + buf


meta = {"format": "octet-checkpoint", "format_version": "1", "epoch": "1", "batch": "0", "step": "10",
        "best_top1": "0.5", "best_loss": "inf", "plateau_factor": "1", "plateau_best": "inf", "plateau_bad": "0",
        "rng_seed": "0", "rng_offset": "3", "epoch_loss_sum": "2.5", "epoch_examples": "8", "epoch_correct": "3",
        "epoch_skipped": "0", "recipe": "model:\n  name: small_cnn\n"}
put("checkpoint", "valid", safetensors({"model.w": ("F32", [2, 2], bytes(16)), "optimizer.w.m": ("I8", [4], bytes(4)),
                                       "int8.conv.clip": ("F64", [1], bytes(8))}, meta))
put("checkpoint", "no_tensors", safetensors({}, meta))
put("checkpoint", "not_octet", safetensors({"a": ("BF16", [3], bytes(6))}, {"k": "v"}))
put("checkpoint", "scalar_and_empty", safetensors({"model.s": ("I64", [], bytes(8)), "model.e": ("U8", [0, 5], b""),
                                                  "model.i": ("I32", [1], bytes(4))}, dict(meta, epoch="-1")))
put("checkpoint", "short", b"\x10\x00\x00")

for name in sorted(os.listdir(os.path.join(here, "../../recipes"))):
    if name.endswith(".yaml") and "int8" not in name:
        with open(os.path.join(here, "../../recipes", name), "rb") as f:
            put("recipe", name, f.read())
put("recipe", "flow", b"{optimizer: {name: adam, lr: 1e-3, betas: [0.9, 0.999]}, train: {epochs: 2}}\n")
put("recipe", "anchors", b"train: &t {epochs: 1}\nschedule: {milestones: [1, 2]}\nx: *t\n")
put("recipe", "param_groups", b"optimizer:\n  name: adamw\n  param_groups:\n    - params: [\"*.bias\", \"*bn*\"]\n"
    b"      weight_decay: 0\n    - {params: embedding.*, state_bits: 32, betas: [0.8, 0.9]}\n")
put("recipe", "bad_types", b"train:\n  epochs: [1]\n  allow_tf32: maybe\nmodel:\n  {a: 1}: 2\n")


def idx(magic_dims, dims, payload):
    return struct.pack(">I", 0x0800 | len(dims)) + b"".join(struct.pack(">I", d) for d in dims) + payload


def pair(images, labels):
    # fuzz_idx splits its input: byte 0 says where the images file ends, as a fraction of the rest
    rest = images + labels
    return bytes([min(255, (len(images) * 255 + len(rest) - 1) // max(1, len(rest)))]) + rest


imgs = idx(3, [2, 3, 3], bytes(range(18)))
labs = idx(1, [2], bytes([3, 9]))
put("idx", "valid", pair(imgs, labs))
put("idx", "valid_gz", pair(gzip.compress(imgs, mtime=0), gzip.compress(labs, mtime=0)))
put("idx", "bad_label", pair(imgs, idx(1, [2], bytes([3, 10]))))
put("idx", "huge_claim", pair(idx(3, [1000000, 1000, 1000], b""), labs))
put("idx", "swapped", pair(labs, imgs))

put("cifar10", "one_record", bytes([7]) + bytes(range(256)) * 12)
put("cifar10", "two_records", (bytes([0]) + bytes(3072)) + (bytes([9]) + bytes([255]) * 3072))
put("cifar10", "bad_label", bytes([10]) + bytes(3072))
put("cifar10", "short", bytes([1, 2, 3]))


def corpus(mode, train, valid, test):
    # fuzz_text: byte 0 the mode (bits 0-1 the level: 0 words, 1 characters, 2 BPE; bit 2 the
    # vocabulary parser; bit 3 the BPE codec's round trip), bytes 1 and 2 where train and valid
    # end, as fractions of the rest
    rest = train + valid + test
    n = max(1, len(rest))
    a = (len(train) * 255 + n - 1) // n
    b = (len(valid) * 255 + (n - len(train)) - 1) // max(1, n - len(train))
    return bytes([mode, min(255, a), min(255, b)]) + rest


words = "the cat sat on the mat\n\n the dog sat\n".encode()
put("text", "words", corpus(0, words * 3, b"the cat sat\n", b"a dog ran\n"))
put("text", "chars_utf8", corpus(1, "na\u00efve caf\u00e9 \u2603\n".encode() * 2, "caf\u00e9\n".encode(), b"x\n"))
put("text", "bad_utf8", corpus(1, b"ok\n\xc3\x28\n", b"ok\n", b"ok\n"))
put("text", "empty_valid", corpus(0, words, b"", b"x\n"))
put("text", "vocab", bytes([4, 0, 0]) + b"octet-vocab-1 word\n<unk>\n<eos>\nthe\ncat\n")
put("text", "vocab_dup", bytes([4, 0, 0]) + b"octet-vocab-1 char\n<unk>\n<eos>\na\na\n")
put("text", "bpe_corpus", corpus(2, words * 4, b"the cat sat\r\n", b"a dog ran"))
put("text", "bpe_merges", bytes([4, 0, 0]) + b"octet-vocab-1 bpe\n116 104\n256 101\n32 257\n")
put("text", "bpe_codec", corpus(8, words * 3, "na\u00efve \u2603 \x00\xff".encode("utf-8", "surrogateescape"), b"x"))

# metrics.jsonl as MetricsLog::record writes it (sorted keys, compact, null for NaN and inf), and
# what a killed run or an editor leaves.
def jsonl(*records):
    return b"".join(json.dumps(r, separators=(",", ":"), sort_keys=True).encode() + b"\n" for r in records)


train = {"split": "train", "step": 100, "epoch": 0.5, "loss": 2.25, "top1": 12.5, "lr": 0.1, "samples_per_s": 1234.5}
test = {"split": "test", "step": 200, "epoch": 1, "loss": 1.75, "top1": 40.0}
int8 = {"split": "int8", "step": 100, "epoch": 0.5, "conv1.cos_distance": 0.01, "conv1.lr_scale": 0.9,
        "conv1.grad_clip": 3.5, "fc.cos_distance": None}
put("metrics", "valid", jsonl(train, test, int8))
put("metrics", "killed", jsonl(train, test) + b'{"epoch":1.5,"loss":1.2,"spl')
put("metrics", "no_newline", jsonl(train)[:-1])
put("metrics", "edited", jsonl(train) + b"\n# a note\n[1,2]\n" + jsonl(dict(test, split=3, ppl=1e308, x="y")))
put("metrics", "lm", jsonl({"split": "train", "step": 1, "epoch": 0.1, "loss": 5.5, "ppl": 244.7, "tokens_per_s": 9e4},
                           {"split": "valid", "epoch": 1, "ppl": 180.2}))


# TensorBoard event files: TFRecord framing (length, masked CRC32C, payload, masked CRC32C) around
# Event protos, as TensorBoardWriter writes them (a fixed wall time here). fuzz_tensorboard reads
# byte 0 as a mode (bit 0: recompute the CRCs) and the rest as the file.
def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c ^= b
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
    return c ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def record(payload):
    n = struct.pack("<Q", len(payload))
    return n + struct.pack("<I", masked(n)) + payload + struct.pack("<I", masked(payload))


def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([(v & 0x7F) | 0x80])
        v >>= 7
    return out + bytes([v])


def field(num, wire, body):
    return varint(num << 3 | wire) + body


def ld(num, b):
    return field(num, 2, varint(len(b)) + b)


def event(step, file_version=b"", summary=b""):
    e = field(1, 1, struct.pack("<d", 1.7e9)) + field(2, 0, varint(step & (2**64 - 1)))
    return e + (ld(3, file_version) if file_version else b"") + (ld(5, summary) if summary else b"")


def scalar(tag, value):
    return ld(1, ld(1, tag) + field(2, 5, struct.pack("<f", value)))


head = record(event(0, b"brain.Event:2"))
events = head + record(event(10, summary=scalar(b"train/loss", 0.75))) + \
    record(event(300000000000, summary=scalar(b"test/top1", 91.5) + scalar(b"test/loss", float("nan"))))
put("tensorboard", "valid", b"\x00" + events)
put("tensorboard", "truncated", b"\x00" + events[:-7])
put("tensorboard", "bad_crc", b"\x00" + events[:20] + b"\x55" + events[21:])
put("tensorboard", "other_values", b"\x01" + head + record(event(-1, summary=ld(1, ld(1, b"img") + ld(4, b"\x08\x01"))
                                                                   + ld(1, field(2, 5, b"\0\0\x80\x3f")))))
put("tensorboard", "empty", b"\x00")

try:
    from PIL import Image
except ImportError:
    sys.exit("Pillow is needed for the image seeds")
for mode, size, fmt, name, opts in [("RGB", (5, 3), "PNG", "rgb.png", {}), ("L", (4, 4), "PNG", "gray.png", {}),
                                     ("RGBA", (2, 7), "PNG", "rgba.png", {}), ("P", (3, 3), "PNG", "palette.png", {}),
                                     ("RGB", (9, 6), "JPEG", "rgb.jpg", {"quality": 90}),
                                     ("L", (8, 8), "JPEG", "gray.jpg", {}),
                                     ("RGB", (17, 5), "JPEG", "progressive.jpg", {"progressive": True})]:
    im = Image.new(mode, size)
    im.putdata([(i * 37) % 256 if mode in ("L", "P") else tuple((i * k) % 256 for k in (37, 91, 13, 200)[:len(mode)])
                for i in range(size[0] * size[1])])
    b = io.BytesIO()
    im.save(b, fmt, **opts)
    put("image", name, b.getvalue())
put("image", "gif", b"GIF89a\x01\x00\x01\x00\x00\x00\x00;")


def mat_element(mtype, data, small_ok=True):
    # MAT-file level 5: a tag and data padded to 8 bytes, or the small element format for <= 4 bytes
    if small_ok and 0 < len(data) <= 4:
        return struct.pack("<I", len(data) << 16 | mtype) + data + bytes(4 - len(data))
    e = struct.pack("<II", mtype, len(data)) + data
    return e + bytes((8 - len(e) % 8) % 8)


def mat_array(cls, dims, name, body):
    return mat_element(14, mat_element(6, struct.pack("<II", cls, 0), False) +
                       mat_element(5, b"".join(struct.pack("<i", d) for d in dims), False) +
                       mat_element(1, name) + body, False)


def mat_file(synsets, compressed):
    # a struct array like the ImageNet devkit's meta.mat: an id stored as uint8, a UTF-16 WNID, an empty field
    fields = [b"ILSVRC2012_ID", b"WNID", b"children"]
    body = mat_element(5, struct.pack("<i", 32)) + mat_element(1, b"".join(f.ljust(32, b"\0") for f in fields), False)
    for i, w in synsets:
        body += mat_array(6, [1, 1], b"", mat_element(2, bytes([i])))
        body += mat_array(4, [1, len(w)], b"", mat_element(4, w.encode("utf-16-le")))
        body += mat_array(6, [0, 0], b"", mat_element(9, b"", False))
    var = mat_array(2, [len(synsets), 1], b"synsets", body)
    header = b"MATLAB 5.0 MAT-file, Platform: GLNXA64, Created on: make_corpus".ljust(116) + bytes(8) + b"\x00\x01IM"
    if compressed:
        z = zlib.compress(var)
        return header + struct.pack("<II", 15, len(z)) + z
    return header + var


put("matlab", "synsets", mat_file([(1, "n01440764"), (2, "n01443537")], False))
put("matlab", "synsets_compressed", mat_file([(1, "n01440764"), (2, "n01443537")], True))
put("matlab", "header_only", mat_file([], False)[:128])
