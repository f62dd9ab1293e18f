// Package docs holds the tests of the repository's documents: README.md's Go blocks build, and its install command works.
package docs
