package console_test

import (
	"testing"

	"github.com/batonrun/baton/internal/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }
