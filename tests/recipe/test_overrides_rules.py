"""rlrecipes.recipe.overrides, rule by rule: Hydra's override syntax as rlrecipes parses it (prefixes, empty
values, nulls, quoting, lists, mappings, interpolations, the errors and where they point), the values it
writes back (each one read back through the parser), shell quoting of launcher words, `${VAR}`
substitution and the flattening of nested verl blocks."""

from __future__ import annotations

import math
import subprocess

import pytest

from rlrecipes.errors import RecipeError
from rlrecipes.recipe import overrides as ov

HINT = "use Hydra syntax: key=value, +new.key=value, key=[a,b], key={x:1}"


def typed(value):
    """A value with the exact type of every part, so that True and 1, 1 and 1.0 differ."""
    if isinstance(value, dict):
        return ("dict", tuple((typed(k), typed(v)) for k, v in value.items()))
    if isinstance(value, list):
        return ("list", tuple(typed(v) for v in value))
    if isinstance(value, float) and math.isnan(value):
        return ("float", "nan")
    return (type(value).__name__, value)


# ------------------------------------------------------------------------------------------- keys
@pytest.mark.parametrize(("key", "bare"), [
    ("a.b", "a.b"), ("+a.b", "a.b"), ("++a.b", "a.b"), ("~a.b", "a.b"), ("+++a", "+a"), ("~+a", "+a"),
    ("+~a", "~a"), ("a+b", "a+b"), ("", ""),
])
def test_bare_key_strips_one_hydra_prefix(key, bare):
    assert ov.bare_key(key) == bare


# ---------------------------------------------------------------------------------------- parsing
@pytest.mark.parametrize(("item", "key", "value"), [
    ("a.b=1", "a.b", 1),
    ("a.b=-1", "a.b", -1),
    ("a=1_000", "a", 1000),
    ("a=1.5", "a", 1.5),
    ("a=1e-3", "a", 0.001),
    ("a=nan", "a", math.nan),
    ("a=-inf", "a", -math.inf),
    ("a=true", "a", True),
    ("a=False", "a", False),
    ("a=null", "a", None),
    ("a=", "a", ""),
    ("a=''", "a", ""),
    ("a='null'", "a", "null"),
    ("a='1'", "a", "1"),
    ('a="x y"', "a", "x y"),
    ("a=abc def", "a", "abc def"),
    ("a= 1", "a", 1),
    ("a=0x10", "a", "0x10"),
    ("a='it\\'s'", "a", "it's"),
    ("a=a\\b", "a", "a\\b"),
    ("a=/x/y:z-1", "a", "/x/y:z-1"),
    ("a=[]", "a", []),
    ("a={}", "a", {}),
    ("a=[1,[2,x],null,'3']", "a", [1, [2, "x"], None, "3"]),
    ("a={b:{c:null},d:[1.0,true]}", "a", {"b": {"c": None}, "d": [1.0, True]}),
    ("a={1:x}", "a", {"1": "x"}),
    ("a=${b.c}", "a", "${b.c}"),
    ("a=${X}/y", "a", "${X}/y"),
    ("a=${oc.env:HOME}", "a", "${oc.env:HOME}"),
    ("+a.b=1", "+a.b", 1),
    ("++a.b=x", "++a.b", "x"),
    ("+a=", "+a", ""),
    ("~a.b", "~a.b", None),
    ("~a.b=5", "~a.b", None),
    ("~a=", "~a", None),
])
def test_parse_cli_values_and_prefixes(item, key, value):
    assert typed(ov.parse_cli([item])) == typed({key: value})


def test_parse_cli_gives_plain_python_types():
    parsed = ov.parse_cli(["a=x", "b=[x,{y:z}]", "c={k:v}"])
    assert type(parsed["a"]) is str
    assert type(parsed["b"]) is list and type(parsed["b"][0]) is str and type(parsed["b"][1]) is dict
    assert type(parsed["c"]) is dict and all(type(k) is str and type(v) is str for k, v in parsed["c"].items())


def test_parse_cli_keeps_order_and_the_last_of_a_repeated_key():
    parsed = ov.parse_cli(["b=1", "a=2", "b=3", "+b=4", "~c"])
    assert list(parsed.items()) == [("b", 3), ("a", 2), ("+b", 4), ("~c", None)]
    assert ov.parse_cli([]) == {}


@pytest.mark.parametrize(("item", "message", "hint"), [
    ("a.b", "cannot parse override 'a.b': missing EQUAL at '<EOF>'", HINT),
    ("a..b=1", "cannot parse override 'a..b=1': token recognition error at: '.'", HINT),
    ("a.b=[1,", "cannot parse override 'a.b=[1,': ", HINT),
    ("=3", "override '=3' has no key", "use key=value"),
    ("a.b=1,2", "sweeps are not supported in an override: 'a.b=1,2'", None),
    ("a=range(1,3)", "sweeps are not supported in an override: 'a=range(1,3)'", None),
    ("a=choice(x,y)", "sweeps are not supported in an override: 'a=choice(x,y)'", None),
    ("a@pkg=1", "package overrides (@) are not supported: 'a@pkg=1'", None),
    ("+a@p=1", "package overrides (@) are not supported: '+a@p=1'", None),
])
def test_parse_cli_errors(item, message, hint):
    with pytest.raises(RecipeError) as info:
        ov.parse_cli(["ok=1", item])
    exc = info.value
    assert exc.message.startswith(message) and (exc.message == message or message.endswith(": "))
    assert (exc.where, exc.hint) == ("command line", hint)
    with pytest.raises(RecipeError) as info:
        ov.parse_cli([item], where="profile p")
    assert info.value.where == "profile p"


def test_plain_turns_subclasses_into_plain_values():
    class S(str):
        pass

    class I(int):  # noqa: E742
        pass

    class F(float):
        pass

    value = ov._plain({S("k"): (I(1), F(2.5), S("x"), True, None, [S("y")]), 3: {S("n"): False}})
    assert typed(value) == typed({"k": [1, 2.5, "x", True, None, ["y"]], "3": {"n": False}})
    assert type(ov._plain(I(7))) is int and type(ov._plain(F(0.5))) is float and type(ov._plain(S("s"))) is str
    assert ov._plain(True) is True and ov._plain(False) is False and ov._plain(None) is None
    assert type(ov._plain(1.0)) is float and ov._plain(object) == str(object)


# ---------------------------------------------------------------------------------------- writing
@pytest.mark.parametrize(("value", "text"), [
    (None, "null"), (True, "true"), (False, "false"), (0, "0"), (-3, "-3"), (2**70, "1180591620717411303424"),
    (1.0, "1.0"), (-0.0, "-0.0"), (1.5e-7, "1.5e-07"), (1e100, "1e+100"), (math.nan, "nan"), (math.inf, "inf"),
    (-math.inf, "-inf"),
    ("", "''"), ("x", "x"), ("a.b", "a.b"), ("a/b", "a/b"), ("a:b", "a:b"), ("x-", "x-"), ("_a", "_a"),
    ("/x/y:z-1", "/x/y:z-1"), ("Qwen2.5-3B", "Qwen2.5-3B"), ("true_", "true_"),
    ("-x", "'-x'"), ("9a", "'9a'"), ("a b", "'a b'"), ("a,b", "'a,b'"), ("a=b", "'a=b'"), ("é", "'é'"),
    ("null", "'null'"), ("true", "'true'"), ("nan", "'nan'"), ("inf", "'inf'"), ("1.0", "'1.0'"), ("12", "'12'"),
    ("a\nb", "'a\nb'"),
    ("it's", "'it\\'s'"), ("a\\b", "'a\\b'"), ("a\\", "'a\\\\'"), ("a\\\\", "'a\\\\\\\\'"),
    ("a\\'", "'a\\\\\\''"), ("a\\\\'b", "'a\\\\\\\\\\'b'"), ("a'b\\", "'a\\'b\\\\'"),
    ([], "[]"), ((1, "a b"), "[1,'a b']"), (["x", [None, 1.5]], "[x,[null,1.5]]"), ({}, "{}"),
    ({"k": [1, None], "j": {"i": "x y"}}, "{k:[1,null],j:{i:'x y'}}"),
])
def test_format_value_round_trips(value, text):
    assert ov.format_value(value) == text
    expected = list(value) if isinstance(value, tuple) else value
    assert typed(ov.parse_cli([f"k={text}"])["k"]) == typed(expected)


@pytest.mark.parametrize(("value", "text"), [
    ("${X}", "${X}"), ("${MODELS_DIR}/x", "'${MODELS_DIR}/x'"), ("${A}${B}", "'${A}${B}'"), ("a${X}", "'a${X}'"),
    ("${X} ", "'${X} '"), ("${x}", "'${x}'"), ("${X}/it's", "'${X}/it\\'s'"), (["${X}", "${X}/y"], "[${X},'${X}/y']"),
])
def test_format_value_leaves_variables_to_the_shell(value, text):
    assert ov.format_value(value) == text


@pytest.mark.parametrize(("text", "quoted"), [
    ("", "''"), ("a", "'a'"), ("'", "'\\''"), ("\\", "'\\\\'"), ("\\'", "'\\\\\\''"), ("\\\\'x", "'\\\\\\\\\\'x'"),
    ("a\\b", "'a\\b'"), ("a\\b\\", "'a\\b\\\\'"), ("''", "'\\'\\''"),
])
def test_quote(text, quoted):
    assert ov._quote(text) == quoted
    assert ov.parse_cli([f"k={quoted}"])["k"] == text


@pytest.mark.parametrize(("text", "plain"), [
    ("x", True), ("a b", True), ("/a/b", True), ("nan", False), ("1", False), ("true", False), ("null", False),
    ("[", False), ("a,b", False), ("'x'", False), ("", True),
])
def test_roundtrips(text, plain):
    assert ov._roundtrips(text) is plain


@pytest.mark.parametrize(("value", "text"), [
    (math.nan, "nan"), (math.inf, "inf"), (-math.inf, "-inf"), (0.1, "0.1"), (-2.5, "-2.5"), (1e16, "1e+16"),
    (0.0, "0.0"),
])
def test_format_float(value, text):
    assert ov._format_float(value) == text


def test_format_override():
    assert ov.format_override("~a.b", None) == "~a.b"
    assert ov.format_override("~a.b", 5) == "~a.b"
    assert ov.format_override("+a.b", [1, "x y"]) == "+a.b=[1,'x y']"
    assert ov.format_override("a", None) == "a=null"
    assert ov.format_override("a~", 1) == "a~=1"


# ------------------------------------------------------------------------------------------ shell
@pytest.mark.parametrize(("word", "quoted"), [
    ("a.b=1", "a.b=1"),
    ("a=x y", "'a=x y'"),
    ("a='q'", "'a='\"'\"'q'\"'\"''"),
    ("~a", "'~a'"),
    ("a=$HOME", "'a=$HOME'"),
    ("a=${x}", "'a=${x}'"),
    ("a=${X}", '"a=${X}"'),
    ("a='${X}/x y'", "\"a='${X}/x y'\""),
    ('a="${X}"', '"a=\\"${X}\\""'),
    ("a=${X}$HOME", '"a=${X}\\$HOME"'),
    ("a=${X}$", '"a=${X}\\$"'),
    ("a=${X}`id`", '"a=${X}\\`id\\`"'),
    ("a=${X}\\n", '"a=${X}\\\\n"'),
    ("a=${lower}${X}", '"a=\\${lower}${X}"'),
    ("a=${X}${Y_2}", '"a=${X}${Y_2}"'),
])
def test_shell_word(word, quoted):
    assert ov.shell_word(word) == quoted


def test_shell_word_survives_bash():
    words = ["a='${X}/it'\"s\"'`x` $HOME \\'", "b=${X}", "c=$HOME", "d=${lower}${X}"]
    script = "X='/x y'; printf '%s\\n' " + " ".join(ov.shell_word(w) for w in words)
    out = subprocess.run(["bash", "-c", script], capture_output=True, text=True, check=True,
                         env={"HOME": "/home/h", "PATH": "/usr/bin:/bin"}).stdout
    assert out.splitlines() == ["a='/x y/it'\"s\"'`x` $HOME \\'", "b=/x y", "c=$HOME", "d=${lower}/x y"]


# -------------------------------------------------------------------------------------- variables
def test_substitute():
    variables = {"A": "/a", "N": 3, "L": ["x", 1], "E": ""}
    assert ov.substitute("${A}", variables) == "/a"
    assert ov.substitute("${N}", variables) == 3 and ov.substitute("${L}", variables) == ["x", 1]
    assert ov.substitute("${A}/b-${N}", variables) == "/a/b-3"
    assert ov.substitute("${L}!", variables) == "['x', 1]!"
    assert ov.substitute("pre${E}post", variables) == "prepost"
    assert ov.substitute(["${A}", {"k": "${N}", "j": ["${A}x"]}], variables) == ["/a", {"k": 3, "j": ["/ax"]}]
    assert ov.substitute(("${A}",), variables) == ("${A}",)  # only lists, dicts and strings are walked
    assert ov.substitute(5, variables) == 5 and ov.substitute(None, variables) is None
    assert ov.substitute("${a.b} ${lower} $A", {}) == "${a.b} ${lower} $A"


def test_substitute_unknown_variable():
    with pytest.raises(RecipeError) as info:
        ov.substitute({"k": ["${A}/${NOPE}"]}, {"B": 1, "A": 2})
    assert (info.value.message, info.value.where, info.value.hint) == ("unknown variable ${NOPE}", None,
                                                                     "known variables: A, B")
    with pytest.raises(RecipeError, match=r"^unknown variable \$\{X\} \(hint: known variables: \)$"):
        ov.substitute("${X}", {})


def test_variables_in():
    assert ov.variables_in("${A}/${B_1}${A} ${c} ${a.b}") == {"A", "B_1"}
    assert ov.variables_in(["${A}", ["${B}"], {"k": "${C}"}, 1]) == {"A", "B", "C"}
    assert ov.variables_in({"k": "${A}", "${KEY}": "x", "j": {"i": "${D}"}}) == {"A", "D"}
    assert ov.variables_in([]) == set() and ov.variables_in({}) == set()
    assert ov.variables_in(("${A}",)) == set() and ov.variables_in(None) == set() and ov.variables_in(3) == set()


# -------------------------------------------------------------------------------------- flattening
def test_flatten():
    block = {
        "a": {"b": {"c": 1}, "d": [1, {"e": 2}]},
        "x.y": {"z": 3},
        "+plus": {"k": 1},
        "~tilde": {"k": 1},
        "++both": {"k": {"j": 1}},
        "empty": {},
        "m": {"mixed_precision": {"p": "fp32"}, "override_config": {"q": 1}, "n": {"reward_kwargs": {"r": 2}}},
        "mixed_precision_not": {"s": 1},
        "override_config": {"t": 1},
        1: {2: 3},
        "none": None,
    }
    assert ov.flatten(block) == {
        "a.b.c": 1, "a.d": [1, {"e": 2}],
        "x.y.z": 3,
        "+plus": {"k": 1}, "~tilde": {"k": 1}, "++both": {"k": {"j": 1}},
        "empty": {},
        "m.mixed_precision": {"p": "fp32"}, "m.override_config": {"q": 1}, "m.n.reward_kwargs": {"r": 2},
        "mixed_precision_not.s": 1,
        "override_config": {"t": 1},
        "1.2": 3,
        "none": None,
    }
    assert ov.flatten({"b": {"c": 1}, "d": 2}, "a") == {"a.b.c": 1, "a.d": 2}
    assert ov.flatten({}) == {}
