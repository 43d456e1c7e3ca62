"""Scalable PRISM models whose cyclic parts grow with a parameter (text, written by the caller):
the shapes where value iteration is slow, for tests and ``benchmarks/chains.py``.

>>> from mopmc.examples.scalable import walk
>>> "const int N = 10;" in walk(10)
True
"""

from __future__ import annotations

_WALK = """mdp
const int N = {n};
module walk
  s : [0..N] init 0;
  [slow] s<N -> {up}:(s'=min(s+1,N)) + {down}:(s'=max(s-1,0));
  [fast] s<N -> 0.6:(s'=min(s+1,N)) + 0.4:(s'=max(s-1,0));
  [] s=N -> true;
endmodule
label "goal" = s=N;
rewards "r"
  [slow] true : 1;
  [fast] true : 2;
endrewards
"""

_GRID = """mdp
const int K = {k};
module grid
  x : [0..K] init 0;
  y : [0..K] init 0;
  [east] x<K | y<K -> 0.45:(x'=min(x+1,K)) + 0.2:(y'=min(y+1,K)) + 0.35:(x'=max(x-1,0));
  [north] x<K | y<K -> 0.4:(y'=min(y+1,K)) + 0.25:(x'=min(x+1,K)) + 0.35:(y'=max(y-1,0));
  [] x=K & y=K -> true;
endmodule
label "goal" = x=K & y=K;
rewards "r"
  [east] true : 1;
  [north] true : 3;
endrewards
"""

_CUBE = """mdp
const int K = {k};
module cube
  x : [0..K] init 0;
  y : [0..K] init 0;
  z : [0..K] init 0;
  [a] x<K | y<K | z<K -> 0.4:(x'=min(x+1,K)) + 0.15:(y'=min(y+1,K)) + 0.15:(z'=min(z+1,K)) + 0.3:(x'=max(x-1,0));
  [b] x<K | y<K | z<K -> 0.35:(y'=min(y+1,K)) + 0.15:(x'=min(x+1,K)) + 0.2:(z'=min(z+1,K)) + 0.3:(y'=max(y-1,0));
  [c] x<K | y<K | z<K -> 0.4:(z'=min(z+1,K)) + 0.2:(x'=min(x+1,K)) + 0.1:(y'=min(y+1,K)) + 0.3:(z'=max(z-1,0));
  [] x=K & y=K & z=K -> true;
endmodule
label "goal" = x=K & y=K & z=K;
rewards "r"
  [a] true : 1;
  [b] true : 3;
  [c] true : 2;
endrewards
"""

_RETRIES = """mdp
const int N = {n};
module m
  s : [0..N] init 0;
  b : [0..1] init 0;
  [try] s<N & b=0 -> 0.5:(b'=1) + 0.5:(s'=s+1);
  [safe] s<N & b=0 -> 0.3:(b'=1) + 0.7:(s'=s+1);
  [back] s<N & b=1 -> 0.9:(b'=0) + 0.1:(s'=s+1)&(b'=0);
  [] s=N -> true;
endmodule
label "goal" = s=N;
rewards "r"
  [try] true : 1;
  [safe] true : 2;
  [back] true : 1;
endrewards
"""


_COIN = """mdp
const int N = {processes};
const int K = {k};
const int range = 2*(K+1)*N;
const int left = N;
const int right = 2*(K+1)*N - N;
global counter : [0..range] init (K+1)*N;
module process1
  pc1 : [0..3];
  coin1 : [0..1];
  [] pc1=0 -> 0.5:(coin1'=0)&(pc1'=1) + 0.5:(coin1'=1)&(pc1'=1);
  [] pc1=1 & coin1=0 & counter>0 -> (counter'=counter-1)&(pc1'=2)&(coin1'=0);
  [] pc1=1 & coin1=1 & counter<range -> (counter'=counter+1)&(pc1'=2)&(coin1'=0);
  [] pc1=2 & counter<=left -> (pc1'=3)&(coin1'=0);
  [] pc1=2 & counter>=right -> (pc1'=3)&(coin1'=1);
  [] pc1=2 & counter>left & counter<right -> (pc1'=0);
  [] pc1=3 -> true;
endmodule
{others}
label "finished" = {finished};
label "goal" = {finished} & {ones};
rewards "r"
  true : 1;
endrewards
"""


def walk(n: int, up: str = "0.5", down: str = "0.5") -> str:
    """A one-SCC random walk on 0..n to the goal n: ``slow`` moves up with ``up`` and down with
    ``down`` (PRISM expressions; reward 1), ``fast`` up with 0.6 (reward 2). Value iteration needs
    about n^2 sweeps; the block is banded (bandwidth 1)."""
    return _WALK.format(n=n, up=up, down=down)


def grid(k: int) -> str:
    """A walk on the (k+1)^2 grid to its far corner, drifting towards it under both actions (one
    SCC of bandwidth about k)."""
    return _GRID.format(k=k)


def cube(k: int) -> str:
    """A walk on the (k+1)^3 cube to its far corner under three actions, each drifting towards it
    (one SCC of bandwidth about k^2: sparse LU's separators grow as k^2, its work as k^6)."""
    return _CUBE.format(k=k)


def retries(n: int) -> str:
    """n two-state retry loops in a row (n small SCCs, one after another)."""
    return _RETRIES.format(n=n)


def coin(k: int, processes: int = 4) -> str:
    """The shared-coin protocol of randomised consensus (Aspnes & Herlihy 1990; modelled after
    PRISM's benchmark model): ``processes`` processes flip coins and move one shared counter, in an order
    the scheduler picks, until it leaves ``(N, 2(K+1)N - N)``; ``"goal"``: all finished with coin 1,
    reward ``"r"``: 1 per step. Large cyclic blocks where the values of many states tie; 84,096
    states at ``k=8``."""
    others = "\n".join(f"module process{i} = process1[pc1=pc{i}, coin1=coin{i}] endmodule" for i in range(2, processes + 1))
    finished = "(" + " & ".join(f"pc{i}=3" for i in range(1, processes + 1)) + ")"
    ones = "(" + " & ".join(f"coin{i}=1" for i in range(1, processes + 1)) + ")"
    return _COIN.format(processes=processes, k=k, others=others, finished=finished, ones=ones)


FAMILIES = {"walk": walk, "grid": grid, "cube": cube, "retries": retries, "coin": coin}
