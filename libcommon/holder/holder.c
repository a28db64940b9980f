/* dsec-holder: pid 1 of a sandbox. It holds the sandbox's namespaces open by living, reaps the
 * zombies the kernel reparents to it, and does nothing else. It talks to nobody and reads no
 * input: code in the sandbox cannot make it do anything. SIGKILL from outside (dsec-reap) ends
 * it, and with it, every process of its pid namespace. Static and tiny: an idle sandbox costs
 * little more than this process's page tables and stack. */
#include <signal.h>
#include <sys/wait.h>

int main(void)
{
	sigset_t all, chld;

	/* as pid 1 of its namespace it gets no signal from inside unless it has a handler; block
	 * everything anyway, and wait for SIGCHLD synchronously */
	sigfillset(&all);
	sigprocmask(SIG_BLOCK, &all, NULL);
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	for (;;) {
		while (waitpid(-1, NULL, WNOHANG | __WALL) > 0)
			;
		sigwaitinfo(&chld, NULL);
	}
}
