"""A compile worker (see ``compile_pool``): reads jobs from stdin, compiles each into Triton's
disk cache, answers ``(ok, message)`` on stdout, until stdin closes."""
from __future__ import annotations

import sys
import traceback

from .cache import _load
from .compile_pool import _Job, receive, send


def compile_one(job: _Job) -> None:
    import triton
    from triton.compiler import ASTSource

    fn = _load(job.source, job.origin, job.name, interpret=False)
    triton.compile(ASTSource(fn, job.signature, job.constants, job.attrs), target=job.target, options=job.options)


def main() -> None:
    stdin, stdout = sys.stdin.buffer, sys.stdout.buffer
    sys.stdout = sys.stderr  # anything printed must not corrupt the replies
    import triton.compiler  # noqa: F401  # the import a first job would pay for
    while True:
        try:
            job = receive(stdin)
        except EOFError:
            return
        try:
            compile_one(job)
            send(stdout, (True, ""))
        except Exception as e:  # the launch compiles it again and reports the error there
            send(stdout, (False, "".join(traceback.format_exception_only(type(e), e)).strip()))


if __name__ == "__main__":
    main()
