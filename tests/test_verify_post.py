"""verify.post: the postcondition arrays from formulas equal ``OpSpec.post`` asked rank by rank."""

import numpy as np
import pytest

from pyhccl.core.call import OPS
from pyhccl.verify.atoms import rank_keys
from pyhccl.verify.cases import calls
from pyhccl.verify.post import post_arrays


@pytest.mark.parametrize("n", [1, 2, 3, 5, 8, 13, 64, 65])
@pytest.mark.parametrize("op", list(OPS))
def test_formulas_match_post_rank_by_rank(op, n):
    keys = rank_keys(n, 0)
    for call in calls(op, n, None if n < 64 else [0, 3, 7]):
        fast = post_arrays(call, keys, n <= 64)
        ref = post_arrays(call, keys, n <= 64, generic=True)
        got, want_rows = fast.expand(), ref.expand()
        for i in (0, 1, 2, 4):                  # rank, offset, count, shift
            np.testing.assert_array_equal(got[i], want_rows[i], err_msg=f"{call}")
        np.testing.assert_array_equal(fast.expect[got[3]], ref.expect[want_rows[3]], err_msg=f"{call}")   # the sets
        # each row's expectation is its set's size, key sum and mask, read off post directly
        want = [(len(c.ranks), int(keys[sorted(c.ranks)].sum()) if c.ranks else 0,
                 sum(1 << x for x in c.ranks) if n <= 64 else 0)
                for r in range(n) for c in call.spec.post(call, r)]
        assert [(int(e[0]), int(e[1]), int(e[2]) & (1 << 64) - 1) for e in fast.expect[got[3]]] == want, call


@pytest.mark.parametrize("op", list(OPS))
def test_the_formula_ops_are_the_ones_listed(op):
    from pyhccl.verify.post import _FORMULA, _formula
    for call in calls(op, 5, [3]):
        assert (_formula(call) is not None) == (op in _FORMULA), call
