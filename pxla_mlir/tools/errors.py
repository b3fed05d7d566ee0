"""User mistakes on the command line: one line on stderr, exit 1."""


class CliError(Exception):
    """A mistake the command line reports as ``pxla-mlir: error: ...``."""


def user_error_types() -> tuple:
    """Exceptions that mean "the input is wrong", not "pxla_mlir is broken"."""
    from ..ir.mlir_diff import DiffError
    from ..pass_infra import PipelineFailure
    from ..sharding import MeshError, ShardingSpecError
    from ..targets import TargetError

    types = [CliError, DiffError, PipelineFailure, MeshError, ShardingSpecError, TargetError]
    try:  # jax-facing errors (only importable with jax)
        from ..distributed.processes import MultiProcessError
        from ..pmaps.arguments import PmapUsageError
        from ..tracing import UnboundAxisError
        from ..xmaps import XmapError

        types += [PmapUsageError, UnboundAxisError, XmapError, MultiProcessError]
    except ImportError:  # pragma: no cover
        pass
    return tuple(types)
