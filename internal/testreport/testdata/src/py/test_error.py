import nonexistent_module
def test_x(): pass
