// Package fipsonly holds the test of the redigo driver in a FIPS 140-only
// process (GODEBUG=fips140=only). It is a package of its own so that its
// test binary links the library and the driver without the fault suite
// (tests/fault), whose example store computes SHA-1 when it starts.
package fipsonly
