"""`python -m validation.profile`'s arguments: a window on a kernel that takes none, a negative window or a
malformed config is one argparse error (exit 2, the argument named) before torch is imported."""
from __future__ import annotations

import pytest

from validation import profile


@pytest.mark.parametrize("argv, named", [
    (["--kernel", "sdpa_cudnn", "--window", "1024"], "--window 1024"),
    (["--kernel", "flash_sm90", "--window", "-3"], "--window -3"),
    (["--kernel", "flash_sm90", "--config", "128,128"], "--config"),
])
def test_bad_arguments_are_one_error(argv, named, capsys):
    with pytest.raises(SystemExit) as exc:
        profile.main(argv)
    assert exc.value.code == 2
    assert named in capsys.readouterr().err
