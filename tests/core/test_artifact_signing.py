"""Issue 9 part 2: Ed25519 signatures over the canonical payload, trusted keys in the loader, runtime and inspect.

One artifact is distilled (by `certfsm distill --example --sign KEY`, as
a user would) for the whole module; every test copies it. Without trusted
keys a signed or unsigned artifact loads as before; with trusted keys
only a valid signature by one of them lets it load.
"""

from __future__ import annotations

import base64
import json
import re
import shutil
import stat
import subprocess
import sys

import pytest

pytest.importorskip("cryptography", reason='the sign extra is not installed: pip install "certfsm[sign]"')

from certfsm import runtime  # noqa: E402
from certfsm._artifact import load_artifact, sign_artifact  # noqa: E402
from certfsm._canonical import canonical_bytes, sha256_hex  # noqa: E402
from certfsm._errors import ArtifactError, SigningError  # noqa: E402
from certfsm._inspect import inspect_artifact  # noqa: E402
from certfsm._signing import generate_key_pair, load_private_key, load_public_key  # noqa: E402
from cli_in_process import run_main  # noqa: E402


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """``certfsm ARGS`` run by `main` in this process (`run_main`), shaped like a finished process; the tests that
    must block cryptography start a real interpreter themselves."""
    code, out, err = run_main(*args, cwd=cwd)
    return subprocess.CompletedProcess(["certfsm", *map(str, args)], code, out, err)


def one_line_error(done, pattern):
    """The command failed with exit 2 and exactly one stderr line matching `pattern` (anchored)."""
    assert done.returncode == 2, (done.stdout, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert re.fullmatch(rf"certfsm: error: {pattern}", lines[0]), lines[0]


@pytest.fixture(scope="module")
def keys(tmp_path_factory):
    """Two key pairs made by `certfsm keygen`: (private path, public path, key id) for 'ours' and 'theirs'."""
    folder = tmp_path_factory.mktemp("keys")
    made = {}
    for name in ("ours", "theirs"):
        done = cli("keygen", "--out", folder / name)
        assert done.returncode == 0, done.stderr
        key_id = re.fullmatch(
            rf"{re.escape(str(folder / name))}: private key \(keep it secret\); "
            rf"{re.escape(str(folder / name))}\.pub: public key; key id ([0-9a-f]{{16}})\n",
            done.stdout,
        ).group(1)
        made[name] = (folder / name, folder / f"{name}.pub", key_id)
    return made


@pytest.fixture(scope="module")
def signed_example(tmp_path_factory, keys):
    """`certfsm distill --example --sign ours`: (artifact path, its stdout); distilled once (about 10 s)."""
    folder = tmp_path_factory.mktemp("signed-example")
    out = folder / "example.cfsm"
    done = cli(
        "distill",
        "--example",
        "--out",
        out,
        "--report",
        folder / "report",
        "--jobs",
        "1",
        "--no-progress",
        "--sign",
        keys["ours"][0],
    )
    assert done.returncode == 0, done.stderr
    return out, done.stdout


@pytest.fixture(scope="module")
def signed_session_example(distilled_example, keys, tmp_path_factory):
    """The session's distilled example signed with 'ours' by `sign_artifact`, which `distill --sign` calls too (its
    own test is slow): the signed artifact every fast test here needs, without a second distillation."""
    path = tmp_path_factory.mktemp("signed-session") / "example.cfsm"
    shutil.copyfile(distilled_example[2], path)
    sign_artifact(path, keys["ours"][0])
    return path


@pytest.fixture
def signed(signed_session_example, tmp_path):
    path = tmp_path / "signed.cfsm"
    shutil.copyfile(signed_session_example, path)
    return path


def unsigned_copy(signed_path, path):
    document = json.loads(signed_path.read_bytes())
    del document["signature"]
    path.write_bytes(canonical_bytes(document))
    return path


def pub(keys, name):
    return keys[name][1]


# ---------------------------------------------------------------- keygen


def test_keygen_writes_a_private_key_0600_and_a_public_key_and_never_overwrites(keys, tmp_path):
    private, public, key_id = keys["ours"]
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    assert stat.S_IMODE(public.stat().st_mode) & 0o077 != 0o077 and public.stat().st_mode & stat.S_IRUSR
    assert private.read_bytes().startswith(b"-----BEGIN PRIVATE KEY-----\n")
    assert public.read_bytes().startswith(b"-----BEGIN PUBLIC KEY-----\n")
    assert load_private_key(private).public.key_id == load_public_key(public).key_id == key_id
    assert keys["theirs"][2] != key_id
    before = private.read_bytes(), public.read_bytes()
    one_line_error(
        cli("keygen", "--out", private),
        rf"{re.escape(str(private))}: already exists; certfsm keygen never overwrites a key, choose another "
        r"--out or remove the old key on purpose",
    )
    assert (private.read_bytes(), public.read_bytes()) == before
    lonely = tmp_path / "lonely"
    lonely.with_name("lonely.pub").write_bytes(b"someone's public key")
    with pytest.raises(SigningError, match=rf"^{re.escape(str(lonely))}\.pub: already exists; "):
        generate_key_pair(lonely)
    assert not lonely.exists()


def test_keygen_refusals_name_the_out_parameter_and_the_cli_names_its_flag(keys, tmp_path):
    private = keys["ours"][0]
    with pytest.raises(
        SigningError,
        match=rf"^{re.escape(str(private))}: already exists; certfsm keygen never "
        r"overwrites a key, choose another out= or remove the old key on purpose$",
    ):
        generate_key_pair(private)
    missing = tmp_path / "missing" / "k"
    with pytest.raises(
        SigningError,
        match=rf"^{re.escape(str(missing))}: cannot create the key file \(No such file "
        r"or directory\); choose a writable out= path$",
    ) as error:
        generate_key_pair(missing)
    assert "--" not in str(error.value)
    one_line_error(
        cli("keygen", "--out", missing),
        rf"{re.escape(str(missing))}: cannot create the key file \(No "
        r"such file or directory\); choose a writable --out path",
    )


# ---------------------------------------------------------------- load with and without trusted keys


@pytest.mark.slow
def test_distill_sign_adds_only_the_signature_key_so_the_unsigned_bytes_and_hash_are_unchanged(
    signed_example, keys, tmp_path
):
    path, stdout = signed_example
    document = json.loads(path.read_bytes())
    assert sorted(document) == ["certfsm_artifact", "payload", "sha256", "signature"]
    assert document["signature"]["key_id"] == keys["ours"][2] and document["signature"]["algorithm"] == "ed25519"
    assert path.read_bytes() == canonical_bytes(document)
    assert f"sha256 {document['sha256']}; signed by {keys['ours'][2]}; report written to" in stdout
    unsigned = unsigned_copy(path, tmp_path / "unsigned.cfsm")
    assert sha256_hex(canonical_bytes(document["payload"])) == document["sha256"]
    assert load_artifact(unsigned).sha256 == load_artifact(path).sha256 == document["sha256"]


@pytest.mark.slow
def test_a_signed_artifact_loads_with_its_key_and_without_trusted_keys(signed, keys):
    artifact = load_artifact(signed, trusted_keys=[pub(keys, "ours")])
    assert artifact.is_certified and artifact.signature.key_id == keys["ours"][2]
    assert load_artifact(signed, trusted_keys=[pub(keys, "theirs"), pub(keys, "ours")]).is_certified
    assert load_artifact(signed).signature.key_id == keys["ours"][2]
    assert runtime.load(signed, trusted_keys=[pub(keys, "ours")]).machine is not None
    assert runtime.load_machine(signed, trusted_keys=[load_public_key(pub(keys, "ours"))]) is not None


@pytest.mark.slow
def test_a_signed_artifact_is_refused_with_another_key(signed, keys):
    pattern = (
        rf"^{re.escape(str(signed))}: signed by key id {keys['ours'][2]}, which is not a trusted key \("
        rf"trusted: key id {keys['theirs'][2]}\); re-sign it with certfsm sign {re.escape(str(signed))} --key "
        rf"KEY using a trusted private key, or trust {keys['ours'][2]}'s public key if you mean to$"
    )
    with pytest.raises(ArtifactError, match=pattern):
        load_artifact(signed, trusted_keys=[pub(keys, "theirs")])
    with pytest.raises(ArtifactError, match=pattern):
        runtime.load(signed, trusted_keys=[pub(keys, "theirs")])
    with pytest.raises(ArtifactError, match=pattern):
        runtime.load_machine(signed, trusted_keys=[pub(keys, "theirs")])


def test_an_unsigned_artifact_loads_without_trusted_keys_and_is_refused_with_them(signed, keys, tmp_path):
    unsigned = unsigned_copy(signed, tmp_path / "unsigned.cfsm")
    assert load_artifact(unsigned).signature is None
    pattern = (
        rf"^{re.escape(str(unsigned))}: the artifact is unsigned, but trusted keys are configured \(key id "
        rf"{keys['ours'][2]}\); sign it with certfsm sign {re.escape(str(unsigned))} --key KEY using a trusted "
        r"private key$"
    )
    with pytest.raises(ArtifactError, match=pattern):
        load_artifact(unsigned, trusted_keys=[pub(keys, "ours")])
    with pytest.raises(ArtifactError, match=pattern):
        runtime.load(unsigned, trusted_keys=pub(keys, "ours"))
    with pytest.raises(SigningError, match=r"^trusted_keys is empty; give at least one public key file"):
        load_artifact(unsigned, trusted_keys=[])


def does_not_verify(path, key_id):
    return (
        rf"^{re.escape(str(path))}: the signature by key id {key_id} does not verify over the payload: the "
        r"payload or the signature was changed after signing \(a matching sha256 proves nothing, anyone can "
        r"recompute it\); do not run it, get the artifact again from its signer or re-sign a trusted copy with "
        r"certfsm sign$"
    )


def test_one_byte_changed_in_a_signed_payload_and_rehashed_is_refused_by_the_signature(signed, keys):
    """The SHA-256 alone no longer protects it: the edit is rehashed, so it loads without trusted keys."""
    document = json.loads(signed.read_bytes())
    spec = document["payload"]["spec"]
    spec["name"] = spec["name"][:-1] + chr(ord(spec["name"][-1]) ^ 1)  # one byte of the payload
    document["sha256"] = sha256_hex(canonical_bytes(document["payload"]))
    signed.write_bytes(canonical_bytes(document))
    assert load_artifact(signed).is_certified  # hash, canonical form, structure, certificate: all pass
    with pytest.raises(ArtifactError, match=does_not_verify(signed, keys["ours"][2])):
        load_artifact(signed, trusted_keys=[pub(keys, "ours")])


def test_a_tampered_signature_value_is_refused(signed, keys):
    document = json.loads(signed.read_bytes())
    raw = bytearray(base64.b64decode(document["signature"]["value"]))
    raw[10] ^= 0x01
    document["signature"]["value"] = base64.b64encode(bytes(raw)).decode("ascii")
    signed.write_bytes(canonical_bytes(document))
    with pytest.raises(ArtifactError, match=does_not_verify(signed, keys["ours"][2])):
        load_artifact(signed, trusted_keys=[pub(keys, "ours")])


def test_the_key_id_of_another_key_is_refused(signed, keys):
    """Naming a trusted key that did not sign: verified with that key, it fails; naming an unknown key: not trusted."""
    document = json.loads(signed.read_bytes())
    document["signature"]["key_id"] = keys["theirs"][2]
    signed.write_bytes(canonical_bytes(document))
    with pytest.raises(ArtifactError, match=does_not_verify(signed, keys["theirs"][2])):
        load_artifact(signed, trusted_keys=[pub(keys, "ours"), pub(keys, "theirs")])
    with pytest.raises(ArtifactError, match=rf"signed by key id {keys['theirs'][2]}, which is not a trusted key"):
        load_artifact(signed, trusted_keys=[pub(keys, "ours")])


RESIGN = r"the signature was damaged or edited; re-sign it with certfsm sign {} --key KEY"
MALFORMED = [
    ("not an object", lambda s: "x", r"signature is a string, not an object"),
    (
        "extra key",
        lambda s: {**s, "date": "today"},
        r"signature has the keys algorithm, date, key_id, value, expected exactly algorithm, key_id, value",
    ),
    (
        "algorithm",
        lambda s: {**s, "algorithm": "rsa"},
        r"signature\.algorithm=\"rsa\" is not \"ed25519\", the only signature algorithm this certfsm reads",
    ),
    (
        "key id",
        lambda s: {**s, "key_id": s["key_id"].upper()},
        r"signature\.key_id=\"[0-9A-F]{16}\" is not 16 lowercase hex digits",
    ),
    (
        "short value",
        lambda s: {**s, "value": s["value"][:-8] + "=="},
        r"signature\.value=.* is not the standard base64 of a 64-byte ed25519 signature",
    ),
    (
        "not base64",
        lambda s: {**s, "value": "!" + s["value"][1:]},
        r"signature\.value=.* is not the standard base64 of a 64-byte ed25519 signature",
    ),
]


@pytest.mark.parametrize("edit, message", [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_a_malformed_signature_field_is_refused_even_without_trusted_keys(signed, edit, message):
    document = json.loads(signed.read_bytes())
    document["signature"] = edit(document["signature"])
    signed.write_bytes(canonical_bytes(document))
    with pytest.raises(
        ArtifactError,
        match=rf"^{re.escape(str(signed))}: {message}; "
        rf"{RESIGN.format(re.escape(str(signed)))}$",
    ):
        load_artifact(signed)


def test_sign_replaces_a_signature_and_keeps_the_payload_bytes(signed, keys):
    before = json.loads(signed.read_bytes())
    signature = sign_artifact(signed, keys["theirs"][0])
    after = json.loads(signed.read_bytes())
    assert signature.key_id == after["signature"]["key_id"] == keys["theirs"][2]
    assert (after["payload"], after["sha256"]) == (before["payload"], before["sha256"])
    assert load_artifact(signed, trusted_keys=[pub(keys, "theirs")]).is_certified


# ---------------------------------------------------------------- no cryptography needed without trusted keys


def test_loading_without_trusted_keys_never_imports_cryptography_and_with_them_names_the_extra(signed, keys):
    code = (
        "import sys\nsys.modules['cryptography'] = None\n"
        "import certfsm.runtime as rt\nfrom certfsm._errors import SigningError\n"
        f"ctl = rt.load({str(signed)!r})\n"
        "assert not any(name.startswith('cryptography') and sys.modules[name] is not None for name in sys.modules)\n"
        "try:\n"
        f"    rt.load({str(signed)!r}, trusted_keys=[{str(pub(keys, 'ours'))!r}])\n"
        "except SigningError as error:\n    print(error)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == (
        "checking signatures (trusted keys) needs the cryptography package, which is not "
        'installed; run pip install "certfsm[sign]"\n'
    )


def test_keygen_without_cryptography_is_one_line_naming_the_extra(tmp_path):
    code = (
        "import sys\nsys.modules['cryptography'] = None\nfrom certfsm.cli import main\n"
        f"sys.exit(main(['keygen', '--out', {str(tmp_path / 'k')!r}]))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    one_line_error(
        done,
        r"certfsm keygen needs the cryptography package, which is not installed; "
        r'run pip install "certfsm\[sign\]"',
    )
    assert not (tmp_path / "k").exists()


# ---------------------------------------------------------------- inspect


def test_inspect_says_whether_and_by_whom_an_artifact_is_signed(signed, keys, tmp_path):
    inspection = inspect_artifact(signed)
    assert inspection.is_ok
    assert f"signature: signed by {keys['ours'][2]} (ed25519)" in inspection.lines
    assert (
        f"  ok      signature: signed by {keys['ours'][2]} (ed25519); not verified: check it against trusted "
        "public keys (KEY.pub) with trusted_keys=" in inspection.lines
    )
    assert not any("--" in line for line in inspection.lines)
    done = cli("inspect", signed)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"  ok      signature: signed by {keys['ours'][2]} (ed25519); not verified: check it against trusted "
        "public keys (KEY.pub) with --trust" in done.stdout.splitlines()
    )
    unsigned = inspect_artifact(unsigned_copy(signed, tmp_path / "unsigned.cfsm"))
    assert unsigned.is_ok and "signature: unsigned" in unsigned.lines
    assert "signature" not in [check.name for check in unsigned.checks]


def test_inspect_trust_cli_passes_with_the_signing_key_and_fails_otherwise(signed, keys, tmp_path):
    done = cli("inspect", signed, "--trust", pub(keys, "theirs"), "--trust", pub(keys, "ours"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        f"  ok      signature: signed by {keys['ours'][2]}, a trusted key; the ed25519 signature verifies over "
        "the payload" in done.stdout.splitlines()
    )
    done = cli("inspect", signed, "--trust", pub(keys, "theirs"))
    assert done.returncode == 1
    lines = done.stdout.splitlines()
    assert any(
        line.startswith(
            f"  FAILED  signature: {signed}: signed by key id {keys['ours'][2]}, which is not a trusted key"
        )
        for line in lines
    )
    assert lines[-1] == "verdict: FAILED: the signature check did not pass"
    unsigned = unsigned_copy(signed, tmp_path / "unsigned.cfsm")
    done = cli("inspect", unsigned, "--trust", pub(keys, "ours"))
    assert done.returncode == 1 and done.stdout.splitlines()[-1] == "verdict: FAILED: the signature check did not pass"
    assert f"  FAILED  signature: {unsigned}: the artifact is unsigned, but trusted keys are configured" in done.stdout


# ---------------------------------------------------------------- sign CLI and bad inputs


def test_sign_cli_signs_an_unsigned_artifact_in_place(signed, keys, tmp_path):
    unsigned = unsigned_copy(signed, tmp_path / "unsigned.cfsm")
    done = cli("sign", unsigned, "--key", keys["ours"][0])
    assert (done.returncode, done.stdout, done.stderr) == (
        0,
        f"{unsigned}: signed by {keys['ours'][2]} (ed25519)\n",
        "",
    )
    assert unsigned.read_bytes() == signed.read_bytes()  # Ed25519 is deterministic: the same bytes as distill --sign
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def bad_inputs(tmp_path, keys, signed):
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key\n")
    rsa_like = tmp_path / "truncated.pem"
    rsa_like.write_bytes(keys["ours"][0].read_bytes()[:60] + b"\n-----END PRIVATE KEY-----\n")
    k, p = re.escape(str(keys["ours"][0])), re.escape(str(keys["ours"][1]))
    g, t = re.escape(str(garbage)), re.escape(str(rsa_like))
    priv_fix = r"give the private key file written by certfsm keygen --out KEY \(not KEY\.pub\)"
    pub_fix = r"give the public key file KEY\.pub written by certfsm keygen --out KEY"
    return [
        (("sign", signed, "--key", keys["ours"][1]), rf"{p}: a public key, not a private key; {priv_fix}"),
        (
            ("sign", signed, "--key", garbage),
            rf"{g}: not an unencrypted PEM private key \(PKCS8\), or a damaged one; {priv_fix}",
        ),
        (
            ("sign", signed, "--key", rsa_like),
            rf"{t}: not an unencrypted PEM private key \(PKCS8\), or a damaged one; {priv_fix}",
        ),
        (
            ("sign", signed, "--key", tmp_path / "absent"),
            rf"{re.escape(str(tmp_path / 'absent'))}: no such private key file; {priv_fix}",
        ),
        (
            ("sign", tmp_path / "absent.cfsm", "--key", keys["ours"][0]),
            rf"{re.escape(str(tmp_path / 'absent.cfsm'))}: no such file .*",
        ),
        (
            ("inspect", signed, "--trust", keys["ours"][0]),
            rf"{k}: holds a private key, but a trusted key is a public key; {pub_fix} \(and keep the private key off "
            r"the target\)",
        ),
        (
            ("inspect", signed, "--trust", garbage),
            rf"{g}: not a PEM public key \(SubjectPublicKeyInfo\), or a damaged one; {pub_fix}",
        ),
        (
            ("distill", "--example", "--out", tmp_path / "x.cfsm", "--sign", keys["ours"][1]),
            rf"{p}: a public key, not a private key; {priv_fix}",
        ),
    ]


@pytest.mark.slow
def test_each_bad_input_is_one_line_and_exit_2(signed, keys, tmp_path):
    before = signed.read_bytes()
    for args, pattern in bad_inputs(tmp_path, keys, signed):
        one_line_error(cli(*args), pattern)
    assert signed.read_bytes() == before
    assert not (tmp_path / "x.cfsm").exists()  # the key is read before distilling
