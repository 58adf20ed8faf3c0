def test_add(): assert 1 - 2 == 3
def test_sub(): assert 3 - 1 == 2
