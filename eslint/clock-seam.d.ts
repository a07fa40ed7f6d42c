export declare const clockSeamFiles: string[];
