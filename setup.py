"""The one thing pyproject.toml cannot say: the optional C accelerator of the
BTP codec.  ``optional=True``: without a C compiler the install goes on
and reference_impl.btp.packet uses its pure-Python codec."""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "reference_impl.btp._fastcodec",
            ["reference_impl/btp/_fastcodec.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
        # RIPP: the sound-envelope fast path of decode_envelope (refusals stay in Python)
        Extension(
            "reference_impl.ripp._fastenvelope",
            ["reference_impl/ripp/_fastenvelope.c"],
            optional=True,
            extra_compile_args=["-O2"],
        ),
    ]
)
