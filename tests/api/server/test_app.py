"""create_app: its arguments."""
import pytest

from poolq.api.server.app import create_app
from poolq.jobs import Settings


def test_settings_passed_first_are_refused_naming_the_keyword():
    # Settings where the context goes (the order callers wrote before ctx came first) would fail much
    # later, on the first request, as an attribute error of a context: refused at once, saying what to write
    with pytest.raises(TypeError, match=r"create_app\(settings=\.\.\.\)"):
        create_app(Settings())  # type: ignore[arg-type]
