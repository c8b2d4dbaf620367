//go:build race

package model

// raceDetector is true when the tests run with -race, which makes the
// model's searches about ten times slower.
const raceDetector = true
