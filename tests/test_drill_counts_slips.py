"""`drill counts`: a wrong count explained by a mistake and the slips beside it (issue 20, C).

A count typed in GB where the answer is in GiB, the elements given for the bytes, a number cut off
instead of rounded, each named on its own or beside a known mistake (``52 GB`` for a KV cache without
the factor 2).  Every expected number here is worked by hand in the test: the sizes are chosen so that
the counts are powers of two times small numbers.
"""

from __future__ import annotations

import random
import sqlite3
from fractions import Fraction

import pytest

from tutor.drills import counts, inference
from tutor.drills.driver import Answered, attempt
from tutor.drills.record import count_tolerance, grade, read_count

LAYER = counts.Layer(4096, 32, 8, 128, 128)  # grouped-query: 8 K/V heads of 128

# The attention weights [1, 4, 4096, 4096] in float16: 4·2^12·2^12·2 = 2^27 = 134,217,728 bytes = 0.125 GiB;
# 2^26 = 67,108,864 elements.  Its mistakes: bits 2^30, one head 2^25, float32 2^28.
WEIGHTS = counts.weights_memory_question(1, 4, 4096, "float16", "w")
# The KV cache of 48 such layers, B = 8, L = 32768, float32: 2·48·8·32768·8·128·4 = 48·2^31 = 103,079,215,104
# bytes = 96 GiB.  Without the factor 2: 48 GiB = 51,539,607,552 bytes = 51.54 GB; as elements 24 GiB.
KV32 = counts.kv_cache_question(LAYER, 48, 8, 32768, "float32", "kv32")
# The same in float16 with B = 16: the same 96 GiB, 48 GiB without the factor 2 -- which is also its elements.
KV16 = counts.kv_cache_question(LAYER, 48, 16, 32768, "float16", "kv16")
# 40 layers, B = 1, L = 32768, float16: 2·40·32768·8·128·2 = 5·2^30 = 5,368,709,120 bytes; its mistakes are
# 2×, 4× or 8× away, or 40× (one layer): nothing within 5% of it.
KV5 = counts.kv_cache_question(LAYER, 40, 1, 32768, "float16", "kv5")

NO_TWO = "That counts K or V; the cache holds both (the factor 2)."


def said(q, text):
    """The verdict of ``text`` as (outcome, diagnosis, also, details)."""
    v = grade(q, text)
    return v.outcome, v.diagnosis, v.also, v.details


def test_the_hand_counts_are_the_questions_answers():
    assert WEIGHTS.answer == 2**27 == 134_217_728
    assert KV32.answer == KV16.answer == 48 * 2**31 == 96 * 2**30 == 103_079_215_104
    assert KV5.answer == 5 * 2**30 == 5_368_709_120
    assert {v.key: v.value for v in KV32.variants}["drill.counts.kv.no_two"] == 48 * 2**30


# --- GB written for GiB ----------------------------------------------------------------------------


def test_a_gib_count_written_as_gb_is_named_the_issues_input():
    """0.125 GiB typed as 0.125 GB: 125,000,000 bytes, 7% short; 2^27 bytes are 0.134217728 GB."""
    assert said(WEIGHTS, "0.125 GB") == ("wrong", "drill.count.slip.unit", (), (
        "That is the count in GiB (2^30 bytes each), written with GB (10^9 bytes each): 134,217,728 bytes "
        "are 0.125 GiB and about 0.1342 GB.",))


@pytest.mark.parametrize(("text", "sentence"), [
    ("0.125 G", "That is the count in GiB (2^30 bytes each), written with G (10^9 bytes each): 134,217,728 bytes "
                "are 0.125 GiB and about 0.1342 G."),
    ("128 MB", "That is the count in MiB (2^20 bytes each), written with MB (10^6 bytes each): 134,217,728 bytes "
               "are 128 MiB and about 134.2 MB."),
    # the other way: 0.134217728 GB rounded to 0.1342, typed as GiB (shown to a figure more than typed)
    ("0.1342 GiB", "That is the count in GB (10^9 bytes each), written with GiB (2^30 bytes each): 134,217,728 "
                   "bytes are about 0.13422 GB and 0.125 GiB."),
    ("131072 KB", "That is the count in KiB (2^10 bytes each), written with KB (10^3 bytes each): 134,217,728 "
                  "bytes are 131,072 KiB and 134,217.728 KB."),
])
def test_every_prefix_is_read_in_the_other_system(text, sentence):
    assert said(WEIGHTS, text) == ("wrong", "drill.count.slip.unit", (), (sentence,))


def test_a_unit_slip_beside_a_mistake_names_both():
    """48 GiB (the cache without the factor 2) typed as 48 GB."""
    assert said(KV32, "48 GB") == ("wrong", "drill.counts.kv.no_two", ("drill.count.slip.unit",), (
        NO_TWO + " And it is in GiB (2^30 bytes each), written with GB (10^9 bytes each): that count, "
        "51,539,607,552 bytes, is 48 GiB and about 51.54 GB.",))


def test_bits_are_not_read_in_the_other_unit():
    """The bits of the weights are 2^30 = 1 Gi; "1 GB" is not that count in GB (1.074), and bits are no
    bytes to write in GB or GiB: nothing is named."""
    assert said(WEIGHTS, "1 GB") == ("wrong", None, (), ())


def test_a_count_without_a_byte_prefix_has_no_unit_reading():
    """FLOPs in "G": a billion, never 2^30 (forward of a 512-wide layer, B = 1, L = 128, W_O only:
    2·128·512·512 = 67,108,864 FLOPs = 2^26; 0.0625 G would be 2^26 only as a binary prefix)."""
    q = counts.forward_flops_question(counts.Layer(512, 8, 8, 64, 64, False), 1, 128, "output", "f")
    assert q.answer == 2**26
    assert read_count("0.0625 G", "flops").prefix == ""
    assert said(q, "0.0625 G")[1] is None


# --- a mistake, rounded -------------------------------------------------------------------------------


def test_a_mistake_rounded_as_written_is_named_the_issues_input():
    """52 GB for the cache without the factor 2: 51.54 GB rounded to a whole number (2% from it: more than
    the grading's 1%)."""
    assert said(KV32, "52 GB") == ("wrong", "drill.counts.kv.no_two", (), (
        NO_TWO + " That count is 51,539,607,552, which rounds to 52 GB.",))


def test_a_mistake_that_is_also_the_element_count_is_named_both_ways():
    """In float16 the cache without the factor 2 has as many bytes as the cache has elements: either
    may be what happened, and both are said."""
    assert said(KV16, "52 GB") == ("wrong", "drill.counts.kv.no_two", ("drill.count.slip.elements",), (
        "Each of these gives that number:",
        NO_TWO + " That count is 51,539,607,552, which rounds to 52 GB.",
        "That is the number of elements, not of bytes: 51,539,607,552 elements of 2 bytes (float16) are "
        "103,079,215,104 bytes."))


def test_a_mistake_cut_off_names_the_cut():
    """51 GB: 51.5396… GB cut off, not rounded (52), and 1.05% from the count: a slip beside the mistake."""
    assert said(KV32, "51 GB") == ("wrong", "drill.counts.kv.no_two", ("drill.count.slip.truncated",), (
        NO_TWO + " And it is cut off instead of rounded: 51.5396… to a whole number is 52, not 51.",))


def test_a_mistake_within_one_percent_says_how_near():
    """51.2 GB is 0.66% from 51.54 GB but not it rounded to one decimal (51.5)."""
    assert said(KV32, "51.2 GB") == ("wrong", "drill.counts.kv.no_two", (), (
        NO_TWO + " That count is 51,539,607,552; 51.2 GB is within 1% of it.",))


def test_a_number_that_claims_little_precision_is_not_explained_by_chance():
    """The cache's elements without the factor 2 are 12,884,901,888 (12.88 G): 12.9 GB is that rounded as
    written (±0.05); 13 GB claims only ±0.5 (4%), which would fit some mistake by chance: nothing is named."""
    assert said(KV32, "12.9 GB")[1:3] == ("drill.counts.kv.no_two", ("drill.count.slip.elements",))
    assert said(KV32, "13 GB") == ("wrong", None, (), ())


# --- elements for bytes -------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["67108864", "67,108,864", "64 MiB", "0.0625 GiB", "67.11 M"])
def test_the_element_count_given_for_the_bytes_is_named(text):
    """2^26 elements of 2 bytes: however the number is written."""
    assert said(WEIGHTS, text) == ("wrong", "drill.count.slip.elements", (), (
        "That is the number of elements, not of bytes: 67,108,864 elements of 2 bytes (float16) are "
        "134,217,728 bytes.",))


def test_elements_beside_a_mistake_name_both():
    """The cache without the factor 2, as elements of 4 bytes: 48 GiB / 4 = 12,884,901,888."""
    assert said(KV32, "12884901888") == ("wrong", "drill.counts.kv.no_two", ("drill.count.slip.elements",), (
        NO_TWO + " And it counts elements, not bytes: 12,884,901,888 elements of 4 bytes (float32) are "
        "51,539,607,552 bytes.",))


def test_one_byte_elements_have_no_element_reading():
    """int8: an element is a byte; the count of elements is the answer (and right)."""
    q = counts.kv_cache_question(LAYER, 40, 1, 32768, "int8", "i8")
    assert q.answer == 5 * 2**29 and grade(q, str(5 * 2**29)).outcome == "correct"
    assert all(said(q, text)[1] != "drill.count.slip.elements" for text in ("1342177280", "1.342e9", "1.25 GiB"))


# --- the answer, rounded or cut off ----------------------------------------------------------------------


def test_the_answer_cut_off_is_named():
    """5.3e9 for 5.3687e9: 1.3% short, and the answer cut off at one decimal (rounded, 5.4e9)."""
    assert said(KV5, "5.3e9") == ("wrong", "drill.count.slip.truncated", (), (
        "Cut off instead of rounded: 5.3687…e9 to 1 decimal is 5.4e9, not 5.3e9.",))


def test_the_answer_rounded_too_far_is_named():
    """5e9 is 5.3687e9 rounded to one figure: 7% off."""
    assert said(KV5, "5e9") == ("wrong", "drill.count.slip.coarse", (), (
        "That is the answer rounded too far: 5e9 is more than 1% from it (about 5.369e9); within 1% counts.",))
    assert said(KV5, "5 GiB")[0] == "correct"
    assert said(KV5, "5.37 GB")[0] == "correct"  # 0.02% from it


def test_where_only_the_exact_count_is_right_a_rounded_answer_says_so():
    """4096 wide, 32 heads of 128, biases: 4·4096² + 4·4096 = 67,125,248 parameters; without the biases
    67,108,864, 0.02% away -- so only the exact count is right, and 67.13 M (rounded) and 67.12 M (cut
    off) are each the answer written with fewer digits."""
    q = counts.parameters_question(counts.Layer(4096, 32, 32, 128, 128, True), "p")
    assert q.answer == 67_125_248 and count_tolerance(q) == 0
    for text in ("67.13 M", "67.12 M"):
        assert said(q, text) == ("wrong", "drill.count.slip.coarse", (), (
            "That is the answer (67.125248 M) written with fewer digits; here a known mistake lands within 1% "
            "of the answer, so only the exact count is right.",))
    assert said(q, "67.11 M") == ("wrong", "drill.counts.params.no_bias", (), (
        "That leaves out the biases b_Q, b_K, b_V and b_O. That count is 67,108,864, which rounds to 67.11 M.",))


# --- two mistakes giving one count -------------------------------------------------------------------------


def test_two_mistakes_giving_the_same_count_are_both_named():
    """Weights [8, 8, 1024, 1024] in float32: one head and one sequence are both 2^23 bytes."""
    q = counts.weights_memory_question(8, 8, 1024, "float32", "w8")
    assert q.answer == 2**28
    one = next(v for v in q.variants if v.key == "drill.counts.memory.one_head")
    assert one.value == 2**25 and [a.key for a in one.also] == ["drill.counts.flops.no_batch"]
    assert said(q, str(2**25)) == ("wrong", "drill.counts.memory.one_head", ("drill.counts.flops.no_batch",), (
        "Each of these gives that number:", "That is one head; the tensor has num_heads of them.",
        "That is one sequence; the batch has B of them."))


# --- what the store keeps ------------------------------------------------------------------------------------


def test_the_store_keeps_the_mistake_first_then_the_slips():
    v = grade(KV32, "48 GB")
    a = attempt(Answered(KV32, "wrong", 0, text="48 GB", verdict=v))
    assert a.diagnoses == ("drill.counts.kv.no_two", "drill.count.slip.unit")
    right = grade(KV32, "96 GiB")
    assert attempt(Answered(KV32, "correct", 0, text="96 GiB", verdict=right)).diagnoses == ()


def _first_kv_seed() -> tuple[int, counts.Question]:
    return next((s, q) for s in range(100) for q in [inference.questions(s, 1)[0]] if q.topic == "kv_cache")


def test_a_piped_run_shows_and_saves_the_mistake_and_its_slip(cli, home):
    """The cache without the factor 2, in GiB typed as GB (its value in GiB, written with 6 decimals)."""
    seed, q = _first_kv_seed()
    half = next(v.value for v in q.variants if v.key == "drill.counts.kv.no_two")
    assert half * 2 == q.answer
    typed = f"{float(Fraction(half, 2**30)):.6f} GB"
    code, out, err = cli("drill", "counts", "--seed", seed, "--count", 1, input=typed + "\n")
    assert code == 0, err
    assert NO_TWO + " And it is in GiB (2^30 bytes each), written with GB (10^9 bytes each)" in " ".join(out.split())
    with sqlite3.connect(home / "progress.sqlite3") as conn:
        keys = conn.execute("SELECT key FROM mistakes ORDER BY rowid").fetchall()
    assert keys == [("drill.counts.kv.no_two",), ("drill.count.slip.unit",)]


# --- every question of every seed --------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(40))
def test_every_byte_mistake_written_in_the_other_unit_is_named_with_the_slip(seed):
    """For a byte question's every mistake that counts bytes: its GiB written as GB (to 5 significant
    figures) is named as that mistake with the unit slip beside it."""
    rng = random.Random(seed)
    q = (counts.memory_question if seed % 2 else counts.kv_question)(rng, "q")
    for v in q.variants:
        if "unit" not in v.slips:
            continue
        typed = f"{float(Fraction(v.value, 2**30)):.5g} GB"
        outcome, diagnosis, also, details = said(q, typed)
        assert outcome == "wrong" and v.key in (diagnosis, *also) and "drill.count.slip.unit" in also, (typed, details)
