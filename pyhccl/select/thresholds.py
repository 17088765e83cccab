"""The rule selectors' named thresholds (bytes unless noted), each with its HCCL source file.

HCCL source: hccl-selection.md §5.9; files under src/ops/<op>/selector/ unless a path is given.
"""

KiB, MiB, GiB = 1 << 10, 1 << 20, 1 << 30

# src/ops/op_common/selector/auto_selector_base.h
SMALL_COUNT_512KB = 512 * KiB                     # auto_selector_base.h: max size of one UB transfer; IsSmallData
LARGE_COUNT_1024KB = 1 * MiB                      # auto_selector_base.h: IsLargeData
AIV_MAX_PER_RANK_DATA_SIZE = 8 * MiB              # auto_selector_base.h: AIV per-card cap
SMALL_COUNT_16M = 16 * MiB                        # auto_selector_base.h: 960 large/small boundary
DEFAULT_RANK_SIZE = 8.0                           # auto_selector_base.h: baseline ranks for ratio scaling
RS_M2M_1D_MAX_DATA_SIZE = 8 * MiB                 # auto_selector_base.h: RS sched single-level cap
CCU_PARALLEL_MAX_DATA_SIZE = 64 * MiB             # auto_selector_base.h: IsSmallDataCCU
MAX_FRAME_NUM_FOR_CCU_ALGO = 16                   # auto_selector_base.h: frames
# all_reduce_auto_selector.cc
RS_MAX_DATA_SIZE = 16 * MiB                       # all_reduce_auto_selector.cc: sched multi-level R >= 64
AR_M2M_1D_MAX_DATA_SIZE = 8 * MiB                 # all_reduce_auto_selector.cc: sched single-level (D*8/R^2)
AR_AICPU_1D_SMALL_DATA_SIZE = 8 * MiB             # all_reduce_auto_selector.cc: OneShot bound
AR_AICPU_1D_MAX_DATA_SIZE = 32 * MiB              # all_reduce_auto_selector.cc: D*8/R^2 above -> ChunkTwoShot
AR_AICPU_1D_CROSS_SMALL_DATA_SIZE = 32 * MiB      # all_reduce_auto_selector.cc: 2-level MESH_1D
AR_AICPU_1D_64DATATYPE_DATA_SIZE = 8 * MiB        # all_reduce_auto_selector.cc: special dtype OneShot bound
MAX_RANK_NUM_FOR_CONCURRENT_ALGO = 4              # all_reduce/all_gather/reduce_scatter selectors (ranks)
MAX_RANK_NUM_FOR_REDUCE_MS_ALGO = 8               # all_reduce, reduce_scatter selectors (ranks)
AR_FLATTEN_MAX_DATA_SIZE = 512 * KiB              # all_reduce_auto_selector.cc: sched SoleMesh bound
AR_CCU_CLOS_1D_SMALL_DATA_SIZE = 8 * MiB          # all_reduce_auto_selector.cc: sched CLOS SoleNHR bound
AR_AICPU_SEQUENCE_DATA_SIZE = 4 * GiB             # all_reduce_auto_selector.cc: Sequence vs Parallel
OMNI_PCIE_AR_DATA_SIZE = 32 * MiB                 # all_reduce_auto_selector.cc: PCIe Parallel / PipeLine
OMNI_UBX_AR_SCHED_DATA_SIZE = 64 * MiB            # all_reduce_auto_selector.cc: UBX sched MultiJetty / PipeLine
OMNI_UBX_AR_MS_DATA_SIZE = 32 * MiB               # all_reduce_auto_selector.cc: UBX MS NOT_MATCH / PipeLine
AR_AIV_SMALL_DATA_SIZE_IN_BOARD = 128 * KiB       # all_reduce_auto_selector.cc: AIV <= 8P OneShot bound
AR_AIV_BOARD_SIZE = 8                             # all_reduce_auto_selector.cc (ranks)
DEVICE_NUM_PER_MODULE_8 = 8                       # all_reduce/all_gather/reduce_scatter selectors
AR_2P_DETOUR_DATA_SIZE = 8 * MiB                  # all_reduce_auto_selector.cc: 2P Z-axis detour
AR_MORE_64P_SEQ_MAX_DATA_SIZE = 32 * MiB          # all_reduce_auto_selector.cc: sched > 64P sequence
AR_CCU_MAX_RANK_SIZE = 64                         # all_reduce_auto_selector.cc: ccuSize
AR_CCU_SEQ_MAX_DATA_SIZE = 64 * MiB               # all_reduce_auto_selector.cc: sched < 64P sequence
# all_gather_auto_selector.cc
MAX_RANK_NUM_FOR_SEQ_ALGO = 8                     # all_gather_auto_selector.cc: sched <= 8P branch
AG_FLATTEN_MAX_DATA_SIZE = 128 * KiB              # all_gather_auto_selector.cc: sched SoleMesh bound
AG_CCU_SEQUENCE_MAX_DATA_SIZE = 4 * MiB           # all_gather_auto_selector.cc: sched SequenceMeshMesh bound
AG_AICPU_SMALL_DATA_SIZE = 1 * MiB                # all_gather_auto_selector.cc: multi-level SoleNHR bound
AG_AICPU_1D_TWO_LEVEL_DATA_SIZE_THRESHOLD = 1 * GiB   # all_gather_auto_selector.cc: D*R above -> SoleMeshConcur
AG_CCU_CLOS_SMALL_DATA_SIZE = 1 * MiB             # all_gather_auto_selector.cc: <= 8P SoleMesh bound
AG_AICPU_SEQUENCE_DATA_SIZE = 4 * GiB             # all_gather_auto_selector.cc: D*R above -> Sequence
AG_2P_DETOUR_DATA_SIZE = 4 * MiB                  # all_gather_auto_selector.cc: 2P detour
OMNI_PCIE_AG_DATA_SIZE = 4 * MiB                  # all_gather_auto_selector.cc: PCIe/UBX Parallel vs PipeLine
OMNI_UBX_AG_DATA_SIZE = 16 * MiB                  # all_gather_auto_selector.cc: UBX sched Parallel vs PipeLine
AG_CCU_MAX_RANK_SIZE = 64                         # all_gather_auto_selector.cc (ranks)
AG_CCU_RANK_SIZE = 32                             # all_gather_auto_selector.cc (ranks)
AG_UBX_AIV_BIGDATA_RANK_UPPER = 8                 # all_gather_auto_selector.cc (ranks)
AG_UBX_AIV_BIGDATA_RANK_LOWER = 4                 # all_gather_auto_selector.cc (ranks)
AG_AICPU_MAX_RANKSIZE = 1024                      # all_gather_auto_selector.cc local AICPU_MAX_RANKSIZE (ranks)
AICPU_2LEVEL_MAX_TOTAL_DATA_SIZE = 1 * GiB        # all_gather / reduce_scatter selectors (local)
# reduce_scatter_auto_selector.cc
RS_AICPU_1D_MAX_DATA_SIZE = 16 * MiB              # reduce_scatter_auto_selector.cc: D*(8/R)^2 above -> MeshChunk
RS_FLATTEN_MAX_DATA_SIZE = 512 * KiB              # reduce_scatter_auto_selector.cc: sched SoleMesh (D*R)
RS_AICPU_1D_MIN_DATA_SIZE = 4 * MiB               # reduce_scatter_auto_selector.cc: multi-level SoleNHR bound
RS_AICPU_1D_TWO_LEVEL_DATA_SIZE_THRESHOLD = 1536 * MiB   # reduce_scatter_auto_selector.cc: D*R above -> MeshChunk
RS_CCU_64P_MIN_DATA_SIZE = 128 * MiB              # reduce_scatter_auto_selector.cc: 64P Parallel (D*R)
RS_CCU_64P_SEQ_DATA_SIZE = 16 * MiB               # reduce_scatter_auto_selector.cc: Sequence (D*R)
RS_AICPU_SEQUENCE_SIZE_THRESHOLD = 4 * GiB        # reduce_scatter_auto_selector.cc: D*R above -> Sequence
RS_CCU_2DIE_RANK_SIZE = 16                        # reduce_scatter_auto_selector.cc (ranks)
RS_CCU_2DIE_FRAME_NUM = 2                         # reduce_scatter_auto_selector.cc (frames)
RS_CCU_2DIE_MIN_DATA_SIZE = 4 * MiB               # reduce_scatter_auto_selector.cc (D*R)
RS_CCU_2DIE_MAX_DATA_SIZE = 16 * MiB              # reduce_scatter_auto_selector.cc (D*R)
RS_CCU_MAX_RANK_SIZE = 64                         # reduce_scatter_auto_selector.cc (ranks)
RS_2P_DETOUR_DATA_SIZE = 4 * MiB                  # reduce_scatter_auto_selector.cc
OMNI_PCIE_RS_DATA_SIZE = 4 * MiB                  # reduce_scatter_auto_selector.cc
OMNI_UBX_RS_SCHED_DATA_SIZE = 4 * MiB             # reduce_scatter_auto_selector.cc
OMNI_UBX_RS_MS_DATA_SIZE = 2 * MiB                # reduce_scatter_auto_selector.cc
RS_CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE = 32 * MiB   # reduce_scatter_auto_selector.cc (local)
RS_AICPU_MAX_RANKSIZE = 256                       # reduce_scatter_auto_selector.cc local AICPU_MAX_RANKSIZE
RS_1D_TWO_LEVEL_RATIO_BASE = 8.0                  # reduce_scatter_auto_selector.cc: ratio (8/R)^2
# broadcast / reduce / scatter selectors
CCU_SCHEDULE_2LEVEL_MAX_PER_RANK_DATA_SIZE = 1 * MiB   # broadcast/reduce/scatter selectors (local)
CCU_SCHEDULE_SCATTER_MAX_RANK_SIZE = 64           # scatter_auto_selector.cc (local, ranks)
CCU_SCHEDULE_2LEVEL_LESS_64P_MAX_SIZE = 64 * MiB  # broadcast/reduce selectors (local)
BROADCAST_MESH_CCU_MAX_DATA_SIZE = 16 * KiB       # broadcast_auto_selector.cc (per rank)
BROADCAST_NHR_LESS_64P_CCU_MAX_DATA_SIZE = 4 * MiB   # broadcast_auto_selector.cc (per rank)
BROADCAST_NHR_CCU_MAX_DATA_SIZE = 1 * MiB         # broadcast_auto_selector.cc (per rank)
OMNI2D_UBX_BR_DATA_SIZE = 16 * MiB                # broadcast_auto_selector.cc
BROADCAST_CCU_MAX_RANK_SIZE = 64                  # broadcast_auto_selector.cc (ranks)
BROADCAST_UBX_AIV_MAX_RANK = 8                    # broadcast_auto_selector.cc (ranks)
UBX_BC_CONCURRENT_DATA_SIZE = 2 * MiB             # broadcast_auto_selector.cc
REDUCE_AICPU_1D_MAX_DATA_SIZE = 8 * MiB           # reduce_auto_selector.cc
REDUCE_CCU_TWOSHOT_1D_MAX_DATA_SIZE = 16 * MiB    # reduce_auto_selector.cc
REDUCE_NHR_CCU_MAX_DATA_SIZE = 256 * KiB          # reduce_auto_selector.cc (per rank)
OMNI_UBX_MS_DATA_SIZE = 64 * MiB                  # reduce_auto_selector.cc
OMNI2D_UBX_REDUCE_DATA_SIZE = 128 * MiB           # reduce_auto_selector.cc
UBX_REDUCE_CONCURRENT_DATA_SIZE = 2 * MiB         # reduce_auto_selector.cc
REDUCE_CCU_MAX_RANK_SIZE = 64                     # reduce_auto_selector.cc (ranks)
OMNI2D_UBX_SC_DATA_SIZE = 16 * MiB                # scatter_auto_selector.cc (D*R)
UBX_SC_CONCURRENT_DATA_SIZE = 8 * MiB             # scatter_auto_selector.cc (D*R)
# all_to_all_v selectors
CONCURRENT_RANK_LIMIT = 4                         # alltoall_auto_selector.cc (ranks; alltoallv: CONST_4)
BIG_DATA_SIZE_LIMIT = 512                         # alltoall_auto_selector.cc (bytes in CCU, elements in AICPU)
ALLTOALL_ENABLE_MULTI_CHANNEL_DATA_SIZE_LIMIT = 150 * MiB   # alltoall_auto_selector.cc
A2A_CCU_MAX_RANK_SIZE = 64                        # alltoall(v)_auto_selector.cc (ranks)
PAIRWISE_RANK_NUM_PER_BOARD = 8                   # all_to_all_v selectors (local)
PAIRWISE_UNIT_RANK_SIZE = 16                      # all_to_all_v selectors (local, 2*8)
RSV_CCU_8P_MIN_DATA_SIZE = 32 * MiB               # reduce_scatter_v_auto_selector.cc
# AIV limits: src/ops/op_common/algorithm/template/aiv/hccl_aiv_utils.h
MAX_RANK_SIZE = 1024                              # hccl_aiv_utils.h: AIV rank cap
MAX_RANK_SIZE_V = 256                             # hccl_aiv_utils.h: AIV rank cap, AllToAllV/VC
AIV_MAX_CCL_LOOP_NUM = 16                         # hccl_aiv_utils.h
MAX_RANK_NUM_FOR_ORDER_PRESERVED = 8              # src/common/order_preserved_common.h
