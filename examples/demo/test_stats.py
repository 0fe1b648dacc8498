"""Run with: python3 -B test_stats.py"""
import sys

from stats import mean, spread


def main():
    failures = 0
    for xs, want in [([2, 4, 6], 4), ([5], 5), ([1, 2], 1.5)]:
        got = mean(xs)
        if got != want:
            print(f"FAIL mean({xs}) = {got}, want {want}")
            failures += 1
    if spread([3, 9, 1]) != 8:
        print("FAIL spread")
        failures += 1
    if failures:
        print(f"{failures} test(s) failed")
        return 1
    print("all tests passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
