#if AsyncHTTPClient
#endif
