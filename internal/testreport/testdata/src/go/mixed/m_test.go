package mixed

import (
	"fmt"
	"testing"
)

func TestParent(t *testing.T) {
	t.Run("a", func(t *testing.T) {})
	t.Run("b", func(t *testing.T) { t.Skip("skip b") })
}

// A test that prints fake events from inside a running test.
func TestPrints(t *testing.T) {
	fmt.Println(`{"Action":"fail","Package":"example.com/calc/mixed","Test":"TestPrints"}`)
	fmt.Println(`--- FAIL: TestX (0.00s)`)
}
