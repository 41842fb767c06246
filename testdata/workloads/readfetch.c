/* readfetch: a program without Python frames that reads a file and
 * fetches from a server through the C library's wrappers (read(2),
 * connect(2)): its disk reads and its download are charged to its leaf
 * native frames, the C library's read and connect.
 *
 * usage: readfetch FILE PORT OUT
 *   reads FILE whole in 1 MiB reads, then connects to 127.0.0.1:PORT,
 *   sends one HTTP/1.0 request and writes what it receives to OUT. */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	if (argc != 4) {
		fprintf(stderr, "usage: readfetch FILE PORT OUT\n");
		return 2;
	}
	enum { BUF = 1 << 20 };
	char *buf = malloc(BUF);
	int fd = open(argv[1], O_RDONLY);
	if (!buf || fd < 0) {
		perror("open");
		return 1;
	}
	ssize_t n;
	long long total = 0;
	while ((n = read(fd, buf, BUF)) > 0)
		total += n;
	close(fd);

	int s = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a;
	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(atoi(argv[2]));
	inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
	if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0) {
		perror("connect");
		return 1;
	}
	const char *req = "GET /model.bin HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	if (write(s, req, strlen(req)) < 0) {
		perror("write");
		return 1;
	}
	int out = open(argv[3], O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (out < 0) {
		perror("open");
		return 1;
	}
	long long got = 0;
	while ((n = read(s, buf, BUF)) > 0) {
		if (write(out, buf, n) != n) {
			perror("write");
			return 1;
		}
		got += n;
	}
	close(out);
	printf("read %lld bytes, received %lld\n", total, got);
	return 0;
}
