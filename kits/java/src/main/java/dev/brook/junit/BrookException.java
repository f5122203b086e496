package dev.brook.junit;

/** Why a Brook cluster could not be started or driven; the message names the cause. */
public final class BrookException extends RuntimeException {
    public BrookException(String message) {
        super(message);
    }

    public BrookException(String message, Throwable cause) {
        super(message, cause);
    }
}
