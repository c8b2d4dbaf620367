package fipsonly_test

import (
	"testing"

	"github.com/redis/rueidis"
	"go.uber.org/goleak"

	"github.com/redlock-go/redlock/driver"
	"github.com/redlock-go/redlock/driver/drivertest"
	rueidisdriver "github.com/redlock-go/redlock/driver/rueidis"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// A lock cycle over rueidis in a FIPS 140-only process
// (GODEBUG=fips140=only), which the test starts.
func TestConformanceFIPS140Only(t *testing.T) {
	drivertest.FIPS140Only(t, drivertest.Driver{
		Name: "rueidis",
		Standalone: func(t testing.TB, addr string) driver.Node {
			c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{addr}, ForceSingleClient: true})
			if c == nil {
				t.Fatalf("rueidis.NewClient: %v", err)
			}
			t.Cleanup(c.Close)
			return rueidisdriver.New(c)
		},
	})
}
