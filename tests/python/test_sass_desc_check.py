"""bench/sass_desc_check.py's rule on hand-written SASS: a descriptor read of a uniform register
that no instruction of the function writes, or of an odd one, is flagged; others are not."""
import importlib.util
from pathlib import Path

_PATH = Path(__file__).resolve().parents[2] / "bench" / "sass_desc_check.py"
_SPEC = importlib.util.spec_from_file_location("sass_desc_check", _PATH)
sass_desc_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(sass_desc_check)


def _instructions(text):
    out = []
    for line in filter(str.strip, text.splitlines()):
        m = sass_desc_check.INSTRUCTION.match(line)
        assert m, line
        out.append((m.group(1), m.group(2)))
    return out


# The shape of the faulting kernel's code (twenty-fifth session): the policy of the first copies
# set by ULDC.64 and UMOV, the last copy's read from UR0/UR1, which nothing sets.
_FAULTY = """
        /*0100*/                   ULDC.64 UR10, c[0x0][0x208] ;
        /*0110*/                   UMOV UR6, UR16 ;
        /*0120*/                   UMOV UR7, UR17 ;
        /*0130*/              @!P1 LDGSTS.E.BYPASS.128 [R19], desc[UR10][R16.64] ;
        /*0140*/               @P1 LDGSTS.E.BYPASS.128 [R19], desc[UR6][R16.64] ;
        /*0150*/               @P1 LDGSTS.E.BYPASS.128 [R21+UR0], desc[UR1][R12.64] ;
"""


def test_flags_only_the_unset_descriptor():
    flagged = sass_desc_check.flagged_in("kernel", _instructions(_FAULTY))
    assert [operands for _, _, operands in flagged] == ["[R21+UR0], desc[UR1][R12.64]"]


def test_set_pairs_pass_and_odd_registers_fail():
    ok = """
        /*0000*/                   ULDC.64 UR4, c[0x0][0x208] ;
        /*0010*/                   LDG.E.128.CONSTANT R4, desc[UR4][R2.64] ;
        /*0020*/                   R2UR UR8, R10 ;
        /*0030*/                   STG.E desc[UR8][R6.64], R4 ;
    """
    assert sass_desc_check.flagged_in("kernel", _instructions(ok)) == []
    odd = """
        /*0000*/                   ULDC.64 UR4, c[0x0][0x208] ;
        /*0010*/                   LDG.E R4, desc[UR5][R2.64] ;
    """
    assert len(sass_desc_check.flagged_in("kernel", _instructions(odd))) == 1
