/* hello: the C half of the sample project of examples/build. `capfs run -- make`
 * compiles it inside the sandbox; bin/hello comes back through sync-back. */
#include <stdio.h>

int main(int argc, char **argv) {
	const char *name = argc > 1 ? argv[1] : "world";
	printf("Hello, %s, from inside the capfs sandbox!\n", name);
	return 0;
}
