#!/usr/bin/python3
"""Writes the small .npy/.npz fixtures of tests/npy/ with NumPy itself.

Run: /usr/bin/python3 tests/npy/make_fixtures.py   (from the repository root)
The outputs are committed; the C tests never need Python. Values follow one
pattern per dtype kind, mirrored in test_npy.c:
  signed ints  : [-6, -3, 0, 3, 6, max]      unsigned: [0, 7, 14, 21, 28, max]
  floats       : [-1.25, -0.75, -0.25, 0.25, 0.75, 65504]
  bool         : [True, False, True, True, False, False]
all with shape (2, 3).
"""
import io
import os
import struct
import zipfile
import zlib

import numpy as np

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")


def values(code):
    dt = np.dtype(code)
    if dt.kind == "b":
        v = np.array([True, False, True, True, False, False])
    elif dt.kind == "i":
        v = np.array([-6, -3, 0, 3, 6, np.iinfo(dt).max], dtype=dt)
    elif dt.kind == "u":
        v = np.array([0, 7, 14, 21, 28, np.iinfo(dt).max], dtype=dt)
    else:
        v = np.array([-1.25, -0.75, -0.25, 0.25, 0.75, 65504.0], dtype=dt)
    return v.astype(dt).reshape(2, 3)


def save(name, arr, version=None):
    path = os.path.join(OUT, name)
    with open(path, "wb") as f:
        if version is None:
            np.save(f, arr, allow_pickle=False)
        else:
            np.lib.format.write_array(f, arr, version=version, allow_pickle=False)


def write_full_zip64(path, name, arr):
    """A one-member stored archive where every size and offset goes through
    ZIP64 records (extra fields in both headers, ZIP64 end record and
    locator), as a writer of multi-GiB archives produces. Built by hand
    because zipfile only uses them when sizes need it; zipfile reads it back
    below as a cross-check."""
    buf = io.BytesIO()
    np.save(buf, arr)
    data = buf.getvalue()
    crc = zlib.crc32(data)
    nm = name.encode()
    ff = 0xFFFFFFFF
    local_extra = struct.pack("<HHQQ", 1, 16, len(data), len(data))
    local = struct.pack("<IHHHHHIIIHH", 0x04034B50, 45, 0, 0, 0, 0x21, crc, ff, ff,
                        len(nm), len(local_extra)) + nm + local_extra
    cd_off = len(local) + len(data)
    cen_extra = struct.pack("<HHQQQ", 1, 24, len(data), len(data), 0)
    central = struct.pack("<IHHHHHHIIIHHHHHII", 0x02014B50, 45, 45, 0, 0, 0, 0x21, crc,
                          ff, ff, len(nm), len(cen_extra), 0, 0, 0, 0, ff) + nm + cen_extra
    z_off = cd_off + len(central)
    eocd64 = struct.pack("<IQHHIIQQQQ", 0x06064B50, 44, 45, 45, 0, 0, 1, 1,
                         len(central), cd_off)
    locator = struct.pack("<IIQI", 0x07064B50, 0, z_off, 1)
    eocd = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, 0xFFFF, 0xFFFF, ff, ff, 0)
    with open(path, "wb") as f:
        f.write(local + data + central + eocd64 + locator + eocd)
    with zipfile.ZipFile(path) as z:
        assert z.read(name) == data
    back = np.load(path)
    assert (back[name[:-4]] == arr).all()


def main():
    os.makedirs(OUT, exist_ok=True)
    for code in ["b1", "i1", "i2", "i4", "i8", "u1", "u2", "u4", "u8", "f2", "f4", "f8"]:
        save(f"le_{code}.npy", values(code))
    for code in ["i2", "i4", "i8", "u2", "u4", "u8", "f2", "f4", "f8"]:
        save(f"be_{code}.npy", values(code).astype(">" + code))
    save("v2_f4.npy", values("f4"), version=(2, 0))
    save("v3_f4.npy", values("f4"), version=(3, 0))
    save("scalar_f8.npy", np.array(2.5))
    save("empty_f4.npy", np.zeros((0, 3), dtype=np.float32))
    save("fortran_f4.npy", np.asfortranarray(values("f4")))
    with open(os.path.join(OUT, "object.npy"), "wb") as f:
        np.save(f, np.array([1, "two", None], dtype=object), allow_pickle=True)
    save("structured.npy", np.zeros(2, dtype=[("a", "<i4"), ("b", "<f4")]))
    save("complex.npy", np.zeros(2, dtype=np.complex64))

    arrays = {"x": values("f4"), "ids": values("i8"), "mask": values("b1")}
    np.savez(os.path.join(OUT, "stored.npz"), **arrays)
    np.savez_compressed(os.path.join(OUT, "deflated.npz"), **arrays)
    # A member with ZIP64 extra fields (sizes forced to 64-bit), as zipfile
    # writes for large members.
    with zipfile.ZipFile(os.path.join(OUT, "zip64.npz"), "w", zipfile.ZIP_DEFLATED) as z:
        buf = io.BytesIO()
        np.save(buf, values("f8"))
        with z.open("big.npy", "w", force_zip64=True) as m:
            m.write(buf.getvalue())
    write_full_zip64(os.path.join(OUT, "zip64_full.npz"), "w.npy", values("i4"))
    # A member that is not an array.
    with zipfile.ZipFile(os.path.join(OUT, "not_npy.npz"), "w") as z:
        z.writestr("readme.txt", "hello")


if __name__ == "__main__":
    main()
