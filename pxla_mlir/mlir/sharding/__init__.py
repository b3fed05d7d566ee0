"""The sharding vocabulary shared by pmap and xmap: ShardingSpec, meshes,
HLO sharding strings, Shardy sharding text, and a terminal picture of who holds what."""

from pxla_mlir.mlir.sharding.hlo_sharding import HloSharding, parse as parse_hlo_sharding
from pxla_mlir.mlir.sharding.mesh import (
           AbstractMesh,
           Mesh,
           MeshError,
           current_mesh,
           dims_from_mapping,
           mapping_from_dims,
)
from pxla_mlir.mlir.sharding.sdy_sharding import SdyDim, SdyMesh, SdySharding
from pxla_mlir.mlir.sharding.spec import (
           Chunked,
           NoSharding,
           Replicated,
           ShardedAxis,
           ShardingSpec,
           ShardingSpecError,
           Unstacked,
           pmap_sharding_spec,
           spec_to_indices,
)

__all__ = ["HloSharding", "parse_hlo_sharding", "AbstractMesh", "Mesh", "MeshError", "current_mesh",
           "dims_from_mapping", "mapping_from_dims", "Chunked", "NoSharding", "Replicated", "ShardedAxis",
           "ShardingSpec", "ShardingSpecError", "Unstacked", "pmap_sharding_spec", "spec_to_indices",
           "SdyDim", "SdyMesh", "SdySharding"]
