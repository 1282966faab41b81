# problem.py: the regression task of train.py, in plain Python so that the
# final check (check.py) can judge a model without importing torch: the
# true weights, the held-out set, and the loss of a linear model on it.
import random

FEATURES = 10
HELD_OUT = 512


def true_weights():
    r = random.Random(7)
    return [r.gauss(0, 1) for _ in range(FEATURES)]


def held_out():
    """HELD_OUT (x, y) pairs, y = x . w, no noise."""
    r = random.Random(99)
    w = true_weights()
    xs = [[r.gauss(0, 1) for _ in range(FEATURES)] for _ in range(HELD_OUT)]
    return xs, [sum(a * b for a, b in zip(x, w)) for x in xs]


def loss(weights, bias):
    """Mean squared error of x . weights + bias on the held-out set."""
    xs, ys = held_out()
    err = 0.0
    for x, y in zip(xs, ys):
        err += (sum(a * b for a, b in zip(x, weights)) + bias - y) ** 2
    return err / len(xs)
