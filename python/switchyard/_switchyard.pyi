"""Type stubs of the native half (switchyard._switchyard). Use the Python modules
(switchyard.place, .sim, .reproduce, .inspect): they take keyword options and return NumPy
arrays and DataFrames; these are the conversions under them."""

from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple, Union

import numpy as np
import numpy.typing as npt

class SwitchyardError(ValueError):
    """Bad input or a failed run, with the one-line message the `switchyard` binary prints."""

class Placer:
    def __init__(
        self,
        policy: str,
        workers: Optional[int],
        weights: Optional[Sequence[float]],
        topology: Optional[str],
        options: Mapping[str, Any],
    ) -> None: ...
    @property
    def policy(self) -> str: ...
    @property
    def workers(self) -> List[Tuple[int, float]]: ...
    def place(
        self, keys: Union[npt.NDArray[np.uint64], npt.NDArray[np.int64], Sequence[Union[str, int]]], sizes: Optional[Sequence[int]] = None
    ) -> npt.NDArray[np.uint32]: ...
    def reset_load(self) -> None: ...
    def load(self) -> Tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]: ...
    def add_worker(self, id: int, weight: float = 1.0) -> None: ...
    def remove_worker(self, id: int) -> None: ...
    def set_weight(self, id: int, weight: float) -> None: ...

def policy_names() -> List[str]: ...
def measure(
    policies: Sequence[str],
    workers: Optional[int],
    weights: Optional[Sequence[float]],
    topology: Optional[str],
    keys: str,
    seed: int,
    undirected: bool,
    options: Mapping[str, Any],
) -> Tuple[List[Dict[str, Any]], List[str]]: ...
def report(text: str, origin: str, seed: Optional[int] = None, threads: Optional[int] = None) -> str: ...
def sweep(scenarios: Sequence[Tuple[str, str, Optional[int]]], threads: Optional[int] = None) -> List[str]: ...
def toml_of_json(json: str) -> str: ...
def mmc(lambda_: float, mu: float, servers: int, customers: int, seed: int) -> Tuple[int, int, float, Optional[float]]: ...
def reproduce(name: str, options: Mapping[str, Any]) -> str: ...
def reproduce_names() -> List[str]: ...
def inspect_results(
    path: str,
    workers: Optional[int] = None,
    policy: Optional[str] = None,
    topology: Optional[str] = None,
    packets: int = 8,
    bytes: int = 12000,
    guess: bool = False,
) -> str: ...
