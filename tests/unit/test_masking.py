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
    mask_json,
    mask_text,
    masked,
    remember,
    safe_url,
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
        ("XSK", False),
        ("'--sk'", True),
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
        pytest.param("../k3y-file", False, id="a-parent-path"),
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


@pytest.mark.parametrize(
    "text, shown",
    [
        pytest.param("COS_SK=s3cr3ts", "COS_SK=***", id="value-that-starts-and-ends-alike"),
        pytest.param('PASSWORD="ab c12" next', 'PASSWORD="***" next', id="double-quoted-value-keeps-its-quotes"),
        pytest.param("PASSWORD='' next", "PASSWORD='***' next", id="empty-quoted-value-keeps-its-quotes"),
        pytest.param("['--sk', 'ab12cd']", "['--sk', '***']", id="quoted-flag-in-a-printed-list"),
        pytest.param("HF_TOKEN=*** COS_SK=zz99", "HF_TOKEN=*** COS_SK=***", id="a-second-secret-after-a-masked-one"),
    ],
)
def test_the_shape_around_a_masked_value_is_kept(text, shown):
    assert mask_text(text) == shown


def test_a_secret_longer_than_a_pattern_looks_at_is_hidden_whole_and_nothing_after_it():
    secret = "aX1" * 667  # 2001 characters: past the 1024 a pattern reads, with an odd remainder
    assert mask_text(f"COS_SK={secret} visible") == "COS_SK=*** visible"


@pytest.mark.parametrize(
    "values",
    [
        pytest.param(["ab12cd", "ab12cdef"], id="one-is-the-start-of-the-other"),
        pytest.param(["zz9999", "ab-zz9999-cd"], id="one-is-inside-the-other"),
    ],
)
def test_a_remembered_value_inside_a_longer_one_does_not_leave_the_rest_showing(values):
    remember(values)
    longer = max(values, key=len)
    assert mask_text(f"x {longer} y") == "x *** y"
    stream = StreamMask()
    assert stream.feed(f"x {longer} y\n".encode()) + stream.flush() == b"x *** y\n"


def test_a_stream_passes_on_at_once_what_cannot_begin_a_secret():
    remember(["ab12cd"])
    stream = StreamMask()
    assert stream.feed(b"step 1 loss 0.5\n") == b"step 1 loss 0.5\n"  # live output is not held back
    assert stream.feed(b"next a") == b"next " and stream.flush() == b"a"
    assert stream.feed(b"step 2\n") == b"step 2\n"  # nothing is left over after a flush


def test_a_secret_flag_hides_its_value_and_not_the_positional_argument_after_it():
    assert mask_argv(["--sk", "s3cr3t", "train.py"]) == ["--sk", "***", "train.py"]


@pytest.mark.parametrize(
    "argv, env, found",
    [
        pytest.param(["https://user:ab:12cd@h/x"], {}, {"ab:12cd"}, id="url-password-with-a-colon"),
        pytest.param(["https://ab12cdef@h/x"], {}, {"ab12cdef"}, id="url-user-only"),
        pytest.param(["--url=https://u:ab12cd@h/x"], {}, {"ab12cd"}, id="url-in-a-flag-value"),
        pytest.param(["--sk=ab12cd"], {}, {"ab12cd"}, id="secret-flag-equals"),
        pytest.param([], {"URL": "https://u:ab12cd@h/"}, {"ab12cd"}, id="url-in-a-variable"),
        pytest.param([], {"COS_SK": "Xy12345X"}, {"Xy12345X"}, id="secret-variable-kept-whole"),
        pytest.param([], {"ERR": "nonnumeric port: 'ab12cd@h'"}, {"ab12cd"}, id="port-quoting-user-info"),
        pytest.param([], {"HDR": "Cookie: sid=ab12cd"}, {"sid=ab12cd"}, id="cookie-header"),
        pytest.param([], {"MSG": "got Bearer ab12cdef99"}, {"ab12cdef99"}, id="bearer-token"),
        pytest.param([], {"Q": "h/?sig=ab12cd&x=1"}, {"ab12cd"}, id="signed-query"),
        pytest.param([], {"ARGS": "--password 'ab12cd' --x"}, {"ab12cd"}, id="quoted-flag-value-without-quotes"),
    ],
)
def test_secrets_found_anywhere_on_the_command_line_or_in_variables(argv, env, found):
    """What `mask_argv`/`masked` hide is also what the supervisor remembers, so the trainer cannot print it either."""
    assert secrets_in(argv, env) == found


def test_data_for_a_record_hides_secret_keys_at_every_depth_and_keeps_other_values():
    data = {
        "HF_TOKEN": "abc",
        "name": "pi0",
        "env": {"COS_SK": "s3cr3t", "EMPTY_KEY": "", "API_KEY": ["k1"], "N": 2},
        "argv": ["--sk", "v"],
        "mixed": [1, None, "https://u:p4ss@h/"],
        "nested": [{"PASSWORD": "x"}],
    }
    assert mask_json(data) == {
        "HF_TOKEN": "***",
        "name": "pi0",
        "env": {"COS_SK": "***", "EMPTY_KEY": "", "API_KEY": ["k1"], "N": 2},
        "argv": ["--sk", "***"],
        "mixed": [1, None, "https://***@h/"],
        "nested": [{"PASSWORD": "***"}],
    }


@pytest.mark.parametrize(
    "url, shown",
    [
        pytest.param("https://user:pa55@example.com:8443/a?b=1#f", "https://example.com:8443/a?…", id="full"),
        pytest.param("https://example.com/a/x.whl", "https://example.com/a/x.whl", id="plain"),
        pytest.param("file:///cfs/x.whl", "file:///cfs/x.whl", id="no-host"),
        pytest.param("/cfs/code/x.whl", "/cfs/code/x.whl", id="path"),
        pytest.param("C:/data/x.whl", "C:/data/x.whl", id="drive-letter"),
        pytest.param("https://user:pa55@host:99999/x.whl?sig=1", "https://host:99999/x.whl?…", id="bad-port"),
        pytest.param("https://u:pa55@h:abc/x", "https://h:abc/x", id="bad-port-no-query"),
        pytest.param("https://user:p@ss@host:99999/x", "https://host:99999/x", id="bad-port-at-in-password"),
        pytest.param("https://h:99999/a?x=1?y=2", "https://h:99999/a?…", id="bad-port-two-question-marks"),
        pytest.param("https://h:99999/a#b?c#d", "https://h:99999/a", id="bad-port-fragment-with-marks"),
    ],
)
def test_a_url_for_a_log_loses_user_info_and_query_and_keeps_the_rest(url, shown):
    assert safe_url(url) == shown


def test_a_malformed_url_without_a_scheme_shows_no_credentials():
    shown = safe_url("//user:pa55@[::1/x?sig=1")
    assert "pa55" not in shown and "sig" not in shown
