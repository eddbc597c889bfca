module github.com/zkrecipes/zkrecipes/recipes/discovery/zkgrpc

go 1.26.0

replace github.com/zkrecipes/zkrecipes => ../../..
