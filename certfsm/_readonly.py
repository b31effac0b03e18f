"""A dict that refuses changes: frozen specs and loaded artifacts stay exactly as checked and hashed."""

from __future__ import annotations

from typing import Any, NoReturn


class ReadOnlyDict(dict[str, Any]):
    """Still a dict for json and isinstance, and picklable; every mutating method raises TypeError(`refusal`)."""

    refusal = "this mapping is read-only"

    def _refuse(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError(self.refusal)

    __setitem__ = __delitem__ = __ior__ = clear = pop = popitem = setdefault = update = _refuse

    def __reduce__(self) -> tuple[type[ReadOnlyDict], tuple[dict[str, Any]]]:
        return (type(self), (dict(self),))
