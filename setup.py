"""Build of the optional compiled kernel of the row fingerprint: ``dsm.hashing._rowhash``, from its C source.

Everything else is in pyproject.toml. The extension is optional: where there is no C compiler or no
``xxhash.h`` (Debian/Ubuntu: ``apt-get install gcc libxxhash-dev``), the build skips it and dsm computes the
same fingerprints with its pure-Python path (slower on strings, binaries, decimals and lists).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "dsm.hashing._rowhash",
            sources=["dsm/hashing/_rowhash.c"],
            extra_compile_args=["-O3", "-std=c11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
        Extension(
            "dsm.formats._jsonkernel",
            sources=["dsm/formats/_jsonkernel.c"],
            extra_compile_args=["-O3", "-std=gnu11", "-Wall", "-Wextra", "-Wno-unused-parameter"],
            optional=True,
        ),
    ]
)
