"""What `core.masking` hides and what it leaves alone, word by word: the short secret words (`sk`, `ak`, `sig`, …)
only as whole words of a name, authorization and cookie headers, and literal values from the shortest worth masking
up; ordinary words that merely contain those letters stay readable."""

from __future__ import annotations

import pytest

from entrypoint.core.masking import (
    MIN_LITERAL,
    StreamMask,
    forget,
    literal,
    mask_argv,
    mask_text,
    masked,
    remember,
    secret_name,
    secrets_in,
)


@pytest.fixture(autouse=True)
def _nothing_remembered():
    forget()
    yield
    forget()


@pytest.mark.parametrize(
    "text, shown",
    [
        pytest.param("COS_SK=s3cr3tvalue", "COS_SK=***", id="cos-sk-variable"),
        pytest.param("export COS_AK=AKID1234", "export COS_AK=***", id="cos-ak-variable"),
        pytest.param("sk=abc", "sk=***", id="bare-sk"),
        pytest.param("--sk s3cr3t now", "--sk *** now", id="sk-flag-and-value"),
        pytest.param("--sk=s3cr3t", "--sk=***", id="sk-flag-equals"),
        pytest.param("Cookie: session=abc; id=2", "Cookie: ***", id="cookie-header"),
        pytest.param("Set-Cookie: sid=abc; Path=/", "Set-Cookie: ***", id="set-cookie-header"),
        pytest.param("authorization: Bearer abc.def", "authorization: ***", id="authorization-header"),
        pytest.param("got Bearer abcdefgh12", "got Bearer ***", id="bearer-token"),
        pytest.param("cos.sig=abc&x=1", "cos.sig=***&x=1", id="sig-word"),
        pytest.param("url https://u:pa55@host/p", "url https://***@host/p", id="url-user-info"),
        pytest.param("DISK=sda1", "DISK=sda1", id="disk-is-not-sk"),
        pytest.param("ASK=yes", "ASK=yes", id="ask-is-not-sk"),
        pytest.param("TASK_NAME=train", "TASK_NAME=train", id="task-is-not-ak"),
        pytest.param("risk: high", "risk: high", id="prose"),
        pytest.param("--max-token-len 48", "--max-token-len 48", id="token-length-counts"),
        pytest.param("tokenizer=paligemma", "tokenizer=paligemma", id="tokenizer"),
    ],
)
def test_secret_words_are_masked_and_look_alikes_are_not(text, shown):
    assert mask_text(text) == shown


@pytest.mark.parametrize(
    "name, secret",
    [
        ("COS_SK", True),
        ("--sk", True),
        ("SK", True),
        ("sk.value", True),
        ("COS_SKIP", False),
        ("DISK", False),
        ("HF_TOKEN", True),
        ("TOKENIZERS_PARALLELISM", False),
        ("--wandb-key", True),
        ("COOKIE", True),
        ("passenger", False),
        ("MY_PASS", True),
    ],
)
def test_secret_names(name, secret):
    assert secret_name(name) is secret


def test_a_secret_flag_hides_the_next_item_only():
    assert mask_argv(["train", "--sk", "s3cr3t", "--disk", "sda1"]) == ["train", "--sk", "***", "--disk", "sda1"]
    assert mask_argv(["--sk", "--next"]) == ["--sk", "--next"]  # a flag, not a value
    assert mask_argv(["--sk=", "x"]) == ["--sk=", "x"]  # nothing to hide


def test_variables_for_display():
    shown = masked({"COS_SK": "v", "DISK": "sda", "EMPTY_KEY": "", "URL": "https://u:pa55@h/"})
    assert shown == {"COS_SK": "***", "DISK": "sda", "EMPTY_KEY": "", "URL": "https://***@h/"}


@pytest.mark.parametrize(
    "value, worth",
    [
        pytest.param("ab12c", False, id="shorter-than-min"),
        pytest.param("ab12cd", True, id="min-with-digits"),
        pytest.param("abcdef", False, id="min-plain-word"),
        pytest.param("abcdefghijklmno", False, id="15-letters"),
        pytest.param("abcdefghijklmnop", True, id="16-letters"),
        pytest.param("/etc/secret-key-file", False, id="a-path"),
        pytest.param("./k3y-file", False, id="a-relative-path"),
        pytest.param("~/k3y-file", False, id="a-home-path"),
        pytest.param("***", False, id="already-masked"),
    ],
)
def test_which_values_are_masked_wherever_they_appear(value, worth):
    assert len("ab12cd") == MIN_LITERAL
    assert literal(value) is worth
    remember([value])
    assert (value not in mask_text(f"x {value} y")) is worth


def test_short_secret_literals_from_the_command_line_are_masked_everywhere():
    found = secrets_in(["--sk", "ab12cd", "--ak=ab12c"], {"COS_SK": "zz9999", "PLAIN": "zz8888"})
    assert found == {"ab12cd", "zz9999"}  # ab12c is too short; PLAIN is no secret's name
    remember(found)
    assert mask_text("echo ab12cd zz9999 zz8888 ab12c") == "echo *** *** zz8888 ab12c"


@pytest.mark.parametrize("cut", [1, 3, 5])
def test_a_remembered_value_split_across_chunks_is_masked(cut):
    remember(["ab12cd"])
    stream = StreamMask()
    data = b"before ab12cd after"
    at = data.index(b"ab12cd") + cut
    out = stream.feed(data[:at]) + stream.feed(data[at:]) + stream.flush()
    assert out == b"before *** after"
